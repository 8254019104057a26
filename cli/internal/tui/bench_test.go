package tui

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// BenchmarkAddEventsAndRender measures feeding a whole trace to the viewer
// and drawing one frame: what the user waits for between events.
func BenchmarkAddEventsAndRender(b *testing.B) {
	events := loadTrace(b)
	b.ReportAllocs()
	for b.Loop() {
		var m tea.Model = New("bench", statusSent)
		for _, ev := range events {
			m, _ = m.Update(ev)
		}
		_ = m.View()
	}
}
