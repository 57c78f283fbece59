package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/codec/codectest"
)

// The seed corpus of each target is in testdata/fuzz/<target>, written from
// the codectest fixtures by TestFuzzCorpus (see corpus_test.go). Run a target
// with, for example:
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 20s ./codec

// FuzzDecode decodes arbitrary bytes at every protocol level. Decode must not
// panic or touch its input, and every error must be a *codec.Error. When it
// succeeds, the packet must survive encode → decode → encode unchanged, with
// Len equal to what Append wrote and the encoding no longer than the input.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		for _, v := range codectest.Versions {
			p, n, err := codec.Decode(data, v)
			if !bytes.Equal(data, orig) {
				t.Fatalf("level %d: Decode modified its input", v)
			}
			if err != nil {
				var ce *codec.Error
				if !errors.As(err, &ce) {
					t.Fatalf("level %d: Decode error %v (%T) is not a *codec.Error", v, err, err)
				}
				if p != nil || n != 0 {
					t.Fatalf("level %d: Decode returned a packet or a length with error %v", v, err)
				}
				continue
			}
			if n < 2 || n > len(data) {
				t.Fatalf("level %d: Decode consumed %d of %d bytes", v, n, len(data))
			}
			if msg := badString(p); msg != "" {
				t.Fatalf("level %d: decoded %s", v, msg)
			}
			enc := p.Append(nil, v)
			if l := p.Len(v); l != len(enc) {
				t.Fatalf("level %d: Len %d, Append wrote %d bytes", v, l, len(enc))
			}
			if len(enc) > n {
				t.Fatalf("level %d: encoding of %d bytes is longer than the %d bytes decoded\n in  % x\n out % x", v, len(enc), n, data[:n], enc)
			}
			p2, n2, err := codec.Decode(enc, v)
			if err != nil {
				t.Fatalf("level %d: re-decoding our own encoding failed: %v\n in  % x\n out % x", v, err, data[:n], enc)
			}
			if n2 != len(enc) {
				t.Fatalf("level %d: re-decoding consumed %d of %d bytes", v, n2, len(enc))
			}
			if !codectest.Equal(p, p2) {
				t.Fatalf("level %d: packet changed in a round trip\n got  %s\n want %s", v, codectest.Format(p2), codectest.Format(p))
			}
			if enc2 := p2.Append(nil, v); !bytes.Equal(enc, enc2) {
				t.Fatalf("level %d: encodings differ\n first  % x\n second % x", v, enc, enc2)
			}
		}
	})
}

// badString names a decoded string field that breaks the UTF-8 or topic
// rules Decode promises to enforce, or returns "".
func badString(p codec.Packet) string {
	var strs [][]byte
	switch p := p.(type) {
	case *codec.Publish:
		if len(p.Topic) > 0 && (!codec.ValidUTF8(p.Topic) || codec.ValidTopicName(p.Topic) != nil) {
			return fmt.Sprintf("PUBLISH topic %q", p.Topic)
		}
		strs = append(strs, p.Props.ContentType, p.Props.ResponseTopic)
		for _, u := range p.Props.User {
			strs = append(strs, u.Key, u.Value)
		}
	case *codec.Connect:
		strs = append(strs, p.ClientID, p.Username, p.WillTopic)
		if p.WillFlag && codec.ValidTopicName(p.WillTopic) != nil {
			return fmt.Sprintf("will topic %q", p.WillTopic)
		}
	case *codec.Subscribe:
		for _, s := range p.Subscriptions {
			strs = append(strs, s.Filter)
		}
	case *codec.Unsubscribe:
		strs = append(strs, p.Filters...)
	}
	for _, s := range strs {
		if !codec.ValidUTF8(s) {
			return fmt.Sprintf("string %q that is not MQTT UTF-8", s)
		}
	}
	return ""
}

// readerParams turns the fuzzer's level byte into a protocol level and a
// bufio buffer size (16 to 128 bytes, small enough that most packets take
// the Reader's large-body path).
func readerParams(level byte) (v byte, bufSize int) {
	return codectest.Versions[int(level)%len(codectest.Versions)], 16 << (int(level) / 3 % 4)
}

// FuzzReaderChunks checks that the Reader gives the same packets and the
// same final error whether the stream arrives whole into a large buffer or
// in chunks of fuzzer-chosen sizes into a small one, and that both agree
// with decoding the bytes with Decode in a loop.
func FuzzReaderChunks(f *testing.F) {
	f.Fuzz(func(t *testing.T, data, sizes []byte, level byte) {
		v, bufSize := readerParams(level)
		chunks := make([]int, len(sizes))
		for i, s := range sizes {
			chunks[i] = int(s) + 1
		}
		whole, wholeErr := readAll(newReader(bytes.NewReader(data), 4096, v))
		split, splitErr := readAll(newReader(&chunkReader{data: data, sizes: chunks}, bufSize, v))
		if wholeErr != splitErr || !equalEncodings(whole, split) {
			t.Fatalf("level %d: whole stream gave %d packets and %v, chunks %v into a %d-byte buffer gave %d packets and %v",
				v, len(whole), wholeErr, chunks, bufSize, len(split), splitErr)
		}
		// The same chunks from a non-blocking source, ErrWouldBlock between
		// every two: nothing is lost or read twice across the resumptions.
		nb, nbErr := readAll(newReader(&chunkReader{data: data, sizes: chunks, block: true}, bufSize, v))
		if wholeErr != nbErr || !equalEncodings(whole, nb) {
			t.Fatalf("level %d: whole stream gave %d packets and %v, non-blocking chunks %v into a %d-byte buffer gave %d packets and %v",
				v, len(whole), wholeErr, chunks, bufSize, len(nb), nbErr)
		}

		var decoded [][]byte
		off, decodeErr := 0, error(io.EOF)
		for off < len(data) {
			p, n, err := codec.Decode(data[off:], v)
			if err != nil {
				decodeErr = readerErr(err)
				break
			}
			decoded = append(decoded, p.Append(nil, v))
			off += n
		}
		if decodeErr != wholeErr || !equalEncodings(decoded, whole) {
			t.Fatalf("level %d: Reader gave %d packets and %v, Decode %d packets and %v",
				v, len(whole), wholeErr, len(decoded), decodeErr)
		}
	})
}

// FuzzMatch checks Match against refMatch, the split-on-'/' reference in
// topic_test.go, for every valid non-shared filter and valid topic name.
// Match must not panic on any input.
func FuzzMatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, filter, topic string) {
		got := codec.Match([]byte(filter), []byte(topic))
		if !utf8.ValidString(filter) || !utf8.ValidString(topic) ||
			!codec.ValidUTF8([]byte(filter)) || !codec.ValidUTF8([]byte(topic)) ||
			codec.ValidFilter([]byte(filter)) != nil || codec.IsShared([]byte(filter)) ||
			codec.ValidTopicName([]byte(topic)) != nil {
			return
		}
		if want := refMatch(filter, topic); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, topic, got, want)
		}
	})
}
