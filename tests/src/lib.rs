//! Test support for acp-usage's end-to-end tests: mock LLM servers, ACP clients, agent launchers.
