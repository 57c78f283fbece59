package store_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/store"
)

// holdEnv makes the test binary a helper that opens the store in the named
// directory, says so, and holds it until its stdin closes.
const holdEnv = "XMQ_STORE_TEST_HOLD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		st, err := store.Open(dir, store.Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("open")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_ = st.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLockedStoreNotDamaged: a store another xmq has open is reported as
// in use, naming the process, and never as damaged (whose advice is to
// move the directory aside); once it is closed it opens again.
func TestLockedStoreNotDamaged(t *testing.T) {
	wantLocked := func(t *testing.T, err error, dir string, pid int) {
		t.Helper()
		want := fmt.Sprintf("in use by another xmq (pid %d)", pid)
		if !errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrDamaged) ||
			!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("Open of a store in use: %v; want ErrLocked saying %q", err, want)
		}
	}
	t.Run("same process", func(t *testing.T) {
		dir := t.TempDir()
		st := openPebble(t, dir, store.Options{})
		for _, opts := range []store.Options{{}, {ReadOnly: true}} {
			_, err := store.Open(dir, opts)
			wantLocked(t, err, dir, os.Getpid())
		}
		must(t, st.Close())
		st = openPebble(t, dir, store.Options{})
		must(t, st.Close())
	})
	t.Run("another process", func(t *testing.T) {
		if runtime.GOOS == "windows" {
			t.Skip("the holder's pid comes from fcntl(F_GETLK)")
		}
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), holdEnv+"="+dir)
		stdin, err := cmd.StdinPipe()
		must(t, err)
		stdout, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "open\n" {
			t.Fatalf("helper: %q", line)
		}
		for _, opts := range []store.Options{{}, {ReadOnly: true}} {
			_, err := store.Open(dir, opts)
			wantLocked(t, err, dir, cmd.Process.Pid)
		}
		must(t, stdin.Close())
		must(t, cmd.Wait())
		st := openPebble(t, dir, store.Options{})
		must(t, st.Close())
	})
}
