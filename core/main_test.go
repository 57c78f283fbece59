package core_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// connection's reader and writer, the $SYS loop and the timers must end with
// Shutdown or with the connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
