package tracecmd

import (
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/tui"
	"github.com/gwdiag/gwdiag/refproxy/trace/sse"
)

// replay shows a saved trace (JSON Lines or an SSE capture; - for stdin):
// with --raw each event as one JSON line, printed as it is read, else in
// the viewer. A trace with bad lines shows its valid events first, then
// fails naming each bad line, as agctl does.
func replay(cmd *cobra.Command, o *options) error {
	if o.raw {
		w := cmd.OutOrStdout()
		return sse.ReadCaptureFile(o.file, cmd.InOrStdin(), func(c sse.Captured) error {
			_, err := fmt.Fprintf(w, "%s\n", c.Raw)
			return err
		})
	}
	var events []sse.Captured
	readErr := sse.ReadCaptureFile(o.file, cmd.InOrStdin(), func(c sse.Captured) error {
		events = append(events, c)
		return nil
	})
	if len(events) == 0 && readErr != nil {
		return readErr
	}
	name := o.file
	if name == "-" {
		name = "stdin"
	}
	view := tui.New(name, tui.StatusComplete)
	if followed(events) {
		// A followed capture: the request list above each request's events.
		view = tui.NewFollow(name, tui.StatusComplete)
	}
	m := tea.Model(view.WithClipboard(cmd.OutOrStdout()))
	for _, ev := range events {
		m, _ = m.Update(tui.EventMsg{Raw: ev.Raw, Event: ev.Event})
	}
	m, _ = m.Update(tui.DoneMsg{Err: readErr})
	in := cmd.InOrStdin()
	if err := needTerminal(nil, cmd.OutOrStdout()); err != nil {
		return err
	}
	if o.file == "-" {
		// stdin carried the trace: read keys from the terminal instead.
		tty, err := os.Open("/dev/tty")
		if err != nil {
			return fmt.Errorf("the trace came on stdin and there is no terminal for the viewer: %w (use --raw)", err)
		}
		defer tty.Close()
		in = tty
	} else if err := needTerminal(in, nil); err != nil {
		return err
	}
	prog := tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(in), tea.WithOutput(cmd.OutOrStdout()), tea.WithContext(cmd.Context()))
	if _, err := prog.Run(); err != nil && cmd.Context().Err() == nil {
		return fmt.Errorf("trace viewer: %w", err)
	}
	return readErr
}

// followed reports whether a saved trace is a follow capture: its events
// carry request ids.
func followed(events []sse.Captured) bool {
	for _, ev := range events {
		if ev.Event.RequestID != "" {
			return true
		}
	}
	return false
}
