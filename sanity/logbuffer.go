package sanity

import "sync"

// LogBuffer collects a driver's log for Config.Log: hand it to the driver's
// logger as its io.Writer (slog.NewJSONHandler(buf, nil)) and set
// Config.Log to its Bytes method. It is safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  []byte
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

// Bytes returns a copy of everything written so far.
func (l *LogBuffer) Bytes() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b...), nil
}
