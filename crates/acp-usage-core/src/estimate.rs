//! Token estimates for content no source counted.
//! (Stub; replaced below.)
