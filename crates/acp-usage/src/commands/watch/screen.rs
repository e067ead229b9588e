//! The live view's screen: the header, the sessions' table with context bars, the footer.

use super::*;

/// The title and the column headers.
const BOLD: Style = Style::new().add_modifier(Modifier::BOLD);
/// The footer's words and the sessions no longer running.
const DIM: Style = Style::new().fg(Color::DarkGray);

pub(super) fn view(f: &mut ratatui::Frame<'_>, path: &Path, state: &State, now: i64) {
    let [head, body, foot] =
        Layout::vertical([Constraint::Length(2), Constraint::Min(1), Constraint::Length(1)])
            .areas(f.area());
    f.render_widget(Paragraph::new(footer(path)), foot);
    let snap = match state {
        State::Read(s) => s,
        unread => {
            // Nothing to count: the title alone, and why in place of the table.
            f.render_widget(Paragraph::new(Line::from(title())), head);
            f.render_widget(unread_message(path, unread), body);
            return;
        }
    };
    f.render_widget(Paragraph::new(header(snap, now)), head);
    if snap.sessions.is_empty() {
        f.render_widget(
            Paragraph::new("No session running or active in the last hour.").style(DIM),
            body,
        );
        return;
    }
    f.render_widget(table(snap, body.width as usize, now), body);
}

fn title() -> Span<'static> {
    Span::styled("acp-usage watch", BOLD)
}

/// The keys, the ledger's path and when it was last read.
fn footer(path: &Path) -> Line<'static> {
    let clock = chrono::Local::now().format("%H:%M:%S").to_string();
    Line::from(vec![
        Span::styled("q", BOLD),
        Span::styled(" quit  ", DIM),
        Span::styled("r", BOLD),
        Span::styled(" refresh  ", DIM),
        Span::styled(format!("{}  updated {clock}", path.display()), DIM),
    ])
}

/// What the body says when the ledger could not be read: not there yet, or failing.
fn unread_message(path: &Path, state: &State) -> Paragraph<'static> {
    match state {
        State::Failed(err) => {
            let msg = format!("Cannot read the ledger {}:\n{err}\n\nTrying again.", path.display());
            Paragraph::new(msg).style(Style::new().fg(Color::Red)).wrap(Wrap { trim: false })
        }
        _ => {
            let msg = format!(
                "No ledger at {} yet.\n\nIt appears when an acp-usage relay first records a \
                 session; waiting for it.",
                path.display()
            );
            Paragraph::new(msg).wrap(Wrap { trim: false })
        }
    }
}

/// The title, today's cost, how many sessions run, and the fullest current limit.
fn header(snap: &Snapshot, now: i64) -> Line<'static> {
    let running = snap.running();
    Line::from(vec![
        title(),
        Span::raw("   today "),
        Span::styled(snap.today.fmt(), BOLD.fg(Color::Green)),
        Span::raw(format!(
            "   {running} running · {} more in the last hour",
            snap.sessions.len() - running
        )),
        Span::raw(
            super::current_fullest(&snap.limits, now)
                .map(|l| format!(" · limit {}", l.short()))
                .unwrap_or_default(),
        ),
    ])
}

/// How the table's columns share the terminal's width.
struct Columns {
    widths: [Constraint; 9],
    /// The context bar's width: 0 when the terminal is too narrow for it.
    bar: usize,
    project: usize,
}

impl Columns {
    fn fit(snap: &Snapshot, width: usize) -> Columns {
        // Agent and model as wide as they need (within reason); the project gets what is left
        // and is shortened from the left, where its path says least.
        let widest = |f: fn(&SessionView) -> usize, lo: usize, hi: usize| {
            snap.sessions.iter().map(f).max().unwrap_or(lo).clamp(lo, hi)
        };
        let agent_width = widest(|s| s.agent_label().chars().count(), 5, 24);
        let model_width = widest(|s| s.model.as_deref().map_or(1, |m| m.chars().count()), 5, 32);
        let fixed = 1 + agent_width + model_width + 16 + 5 + 9 + 8 + 8 + 8 * 2;
        // On a narrow terminal the bar goes first: the project says more.
        let bar = if width < fixed + BAR_WIDTH + 1 + 16 { 0 } else { BAR_WIDTH };
        let context_width = 16 + if bar > 0 { bar + 1 } else { 0 };
        let project = width.saturating_sub(fixed + context_width - 16).max(8);
        let widths = [
            Constraint::Length(1),
            Constraint::Length(agent_width as u16),
            Constraint::Length(model_width as u16),
            Constraint::Length(context_width as u16),
            Constraint::Length(5),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Fill(1),
            Constraint::Length(8),
        ];
        Columns { widths, bar, project }
    }
}

/// The sessions' table, under its bold header row.
fn table<'a>(snap: &'a Snapshot, width: usize, now: i64) -> Table<'a> {
    let columns = Columns::fit(snap, width);
    let rows = snap.sessions.iter().map(|s| row(s, &snap.limits, now, &columns));
    let header = Row::new(HEADERS.iter().enumerate().map(|(k, h)| match k {
        0 => Cell::from(""),
        4 | 5 => Cell::from(Line::from(*h).right_aligned()),
        _ => Cell::from(*h),
    }))
    .style(BOLD);
    Table::new(rows, columns.widths).header(header).column_spacing(2)
}

/// One session's row: its cells, the running dot, and the context bar coloured by how full
/// the window is.
fn row(s: &SessionView, limits: &[Limit], now: i64, columns: &Columns) -> Row<'static> {
    let bar_width = columns.bar;
    let mut c = cells(s, limits, now, bar_width, columns.project);
    let state = if s.running {
        Cell::from(Span::styled("●", Style::new().fg(Color::Green)))
    } else {
        Cell::from(Span::styled("○", DIM))
    };
    let level = match s.percent() {
        Some(p) if p >= 85 => Color::Red,
        Some(p) if p >= 60 => Color::Yellow,
        _ => Color::Green,
    };
    let context = std::mem::take(&mut c[3]);
    let (gauge, rest) = match context.char_indices().nth(bar_width) {
        Some((k, _)) if s.percent().is_some() && bar_width > 0 => {
            (context[..k].to_owned(), context[k..].to_owned())
        }
        _ => (String::new(), context),
    };
    let row = Row::new(vec![
        state,
        Cell::from(std::mem::take(&mut c[1])),
        Cell::from(std::mem::take(&mut c[2])),
        Cell::from(Line::from(vec![Span::styled(gauge, Style::new().fg(level)), Span::raw(rest)])),
        Cell::from(Line::from(std::mem::take(&mut c[4])).right_aligned()),
        Cell::from(Line::from(std::mem::take(&mut c[5])).right_aligned()),
        Cell::from(std::mem::take(&mut c[6])),
        Cell::from(std::mem::take(&mut c[7])),
        Cell::from(std::mem::take(&mut c[8])),
    ]);
    if s.running { row } else { row.style(DIM) }
}
