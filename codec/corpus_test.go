package codec_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xmq-io/xmq/codec/codectest"
)

// updateCorpus names the environment variable that makes TestFuzzCorpus
// rewrite the seed corpus instead of checking it.
const updateCorpus = "XMQ_UPDATE_FUZZ_CORPUS"

// corpusEntry renders fuzz arguments in Go's corpus file format.
func corpusEntry(args ...any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch a := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(a)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(a))
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", a)
		default:
			panic(fmt.Sprintf("corpusEntry: unsupported %T", a))
		}
	}
	return b.String()
}

func fileName(name string) string {
	return strings.NewReplacer("/", "-", "$", "S", "#", "H", "+", "P").Replace(name)
}

// seedCorpus is the seed corpus, built from the fixtures: target → file → contents.
func seedCorpus() map[string]map[string]string {
	corpus := map[string]map[string]string{"FuzzDecode": {}, "FuzzReaderChunks": {}, "FuzzMatch": {}}
	for _, c := range codectest.Cases() {
		corpus["FuzzDecode"][fileName(c.Name)] = corpusEntry(c.Raw)
		level := byte(slices.Index(codectest.Versions, c.Version))
		corpus["FuzzReaderChunks"][fileName(c.Name)] = corpusEntry(c.Raw, []byte{0, 1, 2}, level)
	}
	for i, v := range codectest.Versions {
		stream := codectest.Stream(codectest.ValidAt(v))
		for j, sizes := range [][]byte{nil, {0}, {6, 0, 30, 2}, {255, 100}} {
			// Levels i, i+3 … also vary the Reader's buffer size.
			level := byte(i + 3*j)
			name := fmt.Sprintf("stream-v%d-%d", v, j)
			corpus["FuzzReaderChunks"][name] = corpusEntry(stream, sizes, level)
			// The same stream cut short, and followed by a malformed packet.
			corpus["FuzzReaderChunks"][name+"-cut"] = corpusEntry(stream[:len(stream)-3], sizes, level)
			corpus["FuzzReaderChunks"][name+"-bad"] = corpusEntry(append(stream[:len(stream):len(stream)], 0x36, 0), sizes, level)
		}
	}
	for i, m := range matchTests {
		corpus["FuzzMatch"][fmt.Sprintf("match-%03d", i)] = corpusEntry(m.filter, m.topic)
	}
	return corpus
}

// TestFuzzCorpus checks that testdata/fuzz holds the seed corpus built from
// the current fixtures. After changing the fixtures, regenerate it with
//
//	XMQ_UPDATE_FUZZ_CORPUS=1 go test -count=1 -run TestFuzzCorpus ./codec
//
// Files the fuzzer added (failures it found) are kept and not checked.
func TestFuzzCorpus(t *testing.T) {
	update := os.Getenv(updateCorpus) != ""
	for target, files := range seedCorpus() {
		dir := filepath.Join("testdata", "fuzz", target)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, want := range files {
			path := filepath.Join(dir, name)
			if update {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("%s is missing or stale: run %s=1 go test -count=1 -run TestFuzzCorpus ./codec", path, updateCorpus)
				return
			}
		}
	}
}
