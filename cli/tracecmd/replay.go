package tracecmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/admin"
	"github.com/gwdiag/gwdiag/cli/tui"
	"github.com/gwdiag/gwdiag/refproxy/trace"
)

// ReadJSONL reads a JSON Lines trace, keeping each event's exact JSON. Blank
// lines are skipped; errors name the source and line.
func ReadJSONL(r io.Reader, name string) ([]admin.Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	var out []admin.Event
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			return nil, fmt.Errorf("%s:%d: not a JSON trace event: %w", name, line, err)
		}
		if b[0] != '{' {
			return nil, fmt.Errorf("%s:%d: not a JSON trace event: want an object", name, line)
		}
		ev, err := trace.Parse(compact.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, admin.Event{Raw: compact.Bytes(), Event: ev})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return out, nil
}

// followed reports whether a saved trace is a follow capture: its events
// carry request ids.
func followed(events []admin.Event) bool {
	for _, ev := range events {
		if ev.Event.RequestID != "" {
			return true
		}
	}
	return false
}

// replay shows a saved trace: as JSON Lines with --raw, else in the viewer.
func replay(cmd *cobra.Command, o *options) error {
	var (
		r    io.Reader
		name = o.file
	)
	if o.file == "-" {
		r, name = cmd.InOrStdin(), "stdin"
	} else {
		f, err := os.Open(o.file)
		if err != nil {
			return fmt.Errorf("replaying a trace: %w", err)
		}
		defer f.Close()
		r = f
	}
	events, err := ReadJSONL(r, name)
	if err != nil {
		return err
	}
	if o.raw {
		w := cmd.OutOrStdout()
		for _, ev := range events {
			if _, err := fmt.Fprintf(w, "%s\n", ev.Raw); err != nil {
				return err
			}
		}
		return nil
	}
	m := tea.Model(tui.New(name, tui.StatusComplete))
	if followed(events) {
		// A followed capture: the request list above each request's events.
		m = tui.NewFollow(name, tui.StatusComplete)
	}
	for _, ev := range events {
		m, _ = m.Update(tui.EventMsg{Raw: ev.Raw, Event: ev.Event})
	}
	m, _ = m.Update(tui.DoneMsg{})
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
	return nil
}
