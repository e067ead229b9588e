//! The live view's screen: the header, the sessions' table with context bars, the footer.

use super::*;

pub(super) fn view(f: &mut ratatui::Frame<'_>, path: &Path, state: &State, now: i64) {
    let [head, body, foot] =
        Layout::vertical([Constraint::Length(2), Constraint::Min(1), Constraint::Length(1)])
            .areas(f.area());
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let dim = Style::new().fg(Color::DarkGray);
    let title = Span::styled("acp-usage watch", bold);
    let clock = chrono::Local::now().format("%H:%M:%S").to_string();
    let foot_line = Line::from(vec![
        Span::styled("q", bold),
        Span::styled(" quit  ", dim),
        Span::styled("r", bold),
        Span::styled(" refresh  ", dim),
        Span::styled(format!("{}  updated {clock}", path.display()), dim),
    ]);
    f.render_widget(Paragraph::new(foot_line), foot);

    let snap = match state {
        State::Missing => {
            f.render_widget(Paragraph::new(Line::from(title)), head);
            let msg = format!(
                "No ledger at {} yet.\n\nIt appears when an acp-usage relay first records a \
                 session; waiting for it.",
                path.display()
            );
            f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: false }), body);
            return;
        }
        State::Failed(err) => {
            f.render_widget(Paragraph::new(Line::from(title)), head);
            let msg = format!("Cannot read the ledger {}:\n{err}\n\nTrying again.", path.display());
            f.render_widget(
                Paragraph::new(msg).style(Style::new().fg(Color::Red)).wrap(Wrap { trim: false }),
                body,
            );
            return;
        }
        State::Read(s) => s,
    };
    let running = snap.running();
    f.render_widget(
        Paragraph::new(Line::from(vec![
            title,
            Span::raw("   today "),
            Span::styled(snap.today.fmt(), bold.fg(Color::Green)),
            Span::raw(format!(
                "   {running} running · {} more in the last hour",
                snap.sessions.len() - running
            )),
            Span::raw(
                super::current_fullest(&snap.limits, now)
                    .map(|l| format!(" · limit {}", l.short()))
                    .unwrap_or_default(),
            ),
        ])),
        head,
    );
    if snap.sessions.is_empty() {
        f.render_widget(
            Paragraph::new("No session running or active in the last hour.").style(dim),
            body,
        );
        return;
    }
    // Agent and model as wide as they need (within reason); the project gets what is left and
    // is shortened from the left, where its path says least.
    let widest = |f: fn(&SessionView) -> usize, lo: usize, hi: usize| {
        snap.sessions.iter().map(f).max().unwrap_or(lo).clamp(lo, hi)
    };
    let agent_width = widest(|s| s.agent_label().chars().count(), 5, 24);
    let model_width = widest(|s| s.model.as_deref().map_or(1, |m| m.chars().count()), 5, 32);
    let fixed = 1 + agent_width + model_width + 16 + 5 + 9 + 8 + 8 + 8 * 2;
    // On a narrow terminal the bar goes first: the project says more.
    let bar_width = if (body.width as usize) < fixed + BAR_WIDTH + 1 + 16 { 0 } else { BAR_WIDTH };
    let context_width = 16 + if bar_width > 0 { bar_width + 1 } else { 0 };
    let project_width = (body.width as usize).saturating_sub(fixed + context_width - 16).max(8);
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
    let rows = snap.sessions.iter().map(|s| {
        let mut c = cells(s, &snap.limits, now, bar_width, project_width);
        let state = if s.running {
            Cell::from(Span::styled("●", Style::new().fg(Color::Green)))
        } else {
            Cell::from(Span::styled("○", dim))
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
            Cell::from(Line::from(vec![
                Span::styled(gauge, Style::new().fg(level)),
                Span::raw(rest),
            ])),
            Cell::from(Line::from(std::mem::take(&mut c[4])).right_aligned()),
            Cell::from(Line::from(std::mem::take(&mut c[5])).right_aligned()),
            Cell::from(std::mem::take(&mut c[6])),
            Cell::from(std::mem::take(&mut c[7])),
            Cell::from(std::mem::take(&mut c[8])),
        ]);
        if s.running { row } else { row.style(dim) }
    });
    let header = Row::new(HEADERS.iter().enumerate().map(|(k, h)| match k {
        0 => Cell::from(""),
        4 | 5 => Cell::from(Line::from(*h).right_aligned()),
        _ => Cell::from(*h),
    }))
    .style(bold);
    f.render_widget(Table::new(rows, widths).header(header).column_spacing(2), body);
}
