//go:build !unix

package logging

import (
	"fmt"
	"io"

	"go.uber.org/zap/zapcore"
)

// newSyslogCore: there is no syslog here.
func newSyslogCore(target, format string, level zapcore.LevelEnabler) (zapcore.Core, io.Closer, error) {
	return nil, nil, fmt.Errorf("syslog is %w (use log.file)", errNotSupported)
}

// newJournalCore: there is no journal here.
func newJournalCore(socket string, level zapcore.LevelEnabler) (zapcore.Core, io.Closer, error) {
	return nil, nil, fmt.Errorf("the systemd journal is %w (use log.file)", errNotSupported)
}
