package mqtttest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer that a server's writer (a logger, a trace, a
// child process's output) and the test reading it may share.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines is everything written so far, split at newlines (a last newline
// ends the last line rather than starting an empty one).
func (b *Buffer) Lines() []string {
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
