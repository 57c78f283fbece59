package listeners

import (
	"flag"
	"os"
	"testing"
)

// TestMain adds the conformance sub-tests that cannot hold for a transport
// (conformanceSkips) to -test.skip, so they are skipped by name.
func TestMain(m *testing.M) {
	flag.Parse()
	skip := conformanceSkipPattern()
	if prev := flag.Lookup("test.skip").Value.String(); prev != "" {
		skip = prev + "|" + skip
	}
	if err := flag.Set("test.skip", skip); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
