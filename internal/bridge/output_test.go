package bridge

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type emitted struct {
	line string
	cut  int
}

func collect(t *testing.T, r io.Reader, max, size int) []emitted {
	t.Helper()
	var out []emitted
	require.NoError(t, readLinesSized(r, max, size, func(line []byte, cut int) {
		out = append(out, emitted{string(line), cut})
	}))
	return out
}

// A line longer than the limit is cut and counted, and the lines after it
// are read as usual; nothing is left in the pipe.
func TestReadLinesCutsALongLineAndReadsOn(t *testing.T) {
	in := strings.Repeat("x", 100) + "\nshort\r\n" + strings.Repeat("y", 40) + "\nlast"
	r := strings.NewReader(in)
	got := collect(t, r, 32, 16)
	assert.Equal(t, []emitted{{strings.Repeat("x", 32), 68}, {"short", 0}, {strings.Repeat("y", 32), 8}, {"last", 0}}, got)
	assert.Zero(t, r.Len(), "everything was read")
}

// readReply keeps the first max bytes, says there were more, and reads
// the rest.
func TestReadReplyKeepsTheLimitAndDrainsTheRest(t *testing.T) {
	r := strings.NewReader(strings.Repeat("z", 100))
	data, over, err := readReply(r, 10)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("z", 10), string(data))
	assert.True(t, over)
	assert.Zero(t, r.Len())
}

// A failing stream ends the reading with its error, after what came
// before it.
func TestReadLinesReportsTheStreamsError(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	err := readLinesSized(io.MultiReader(strings.NewReader("a\nb"), &failing{boom}), 8, 16, func(line []byte, _ int) { got = append(got, string(line)) })
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"a", "b"}, got)
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

// chunked hands out its data in the pieces sizes says, as a pipe does.
type chunked struct {
	data  []byte
	sizes []byte
	n     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	size := 1
	if len(c.sizes) > 0 {
		size = int(c.sizes[c.n%len(c.sizes)]) + 1
	}
	c.n++
	n := copy(p[:min(len(p), size)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// FuzzReadingACommandsOutput feeds what a command might print, in pieces
// of any size, to the readers of its stderr and stdout: every line comes
// out once, cut to the limit with the cut counted, and the stream is read
// to its end, whatever its lines' lengths.
func FuzzReadingACommandsOutput(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{3, 7}, uint8(4), uint8(0))
	f.Add([]byte(strings.Repeat("x", 300)+"\r\n\n\r\ny"), []byte{200}, uint8(40), uint8(3))
	f.Add([]byte{}, []byte{}, uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, out []byte, sizes []byte, max, size uint8) {
		limit := int(max) + 1
		var want []emitted
		if len(out) > 0 {
			lines := bytes.Split(out, []byte("\n"))
			if len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
			for i, l := range lines {
				kept, cut := l[:min(limit, len(l))], len(l)-min(limit, len(l))
				if cut == 0 && i < len(lines)-1 || cut == 0 && out[len(out)-1] == '\n' {
					kept = bytes.TrimSuffix(kept, []byte("\r"))
				}
				want = append(want, emitted{string(kept), cut})
			}
		}
		r := &chunked{data: out, sizes: sizes}
		got := collect(t, r, limit, 16+int(size))
		if len(want) == 0 {
			want = nil
		}
		require.Equal(t, want, got)
		require.Empty(t, r.data, "stderr was read to its end")

		r = &chunked{data: out, sizes: sizes}
		data, over, err := readReply(r, limit)
		require.NoError(t, err)
		require.Equal(t, string(out[:min(limit, len(out))]), string(data))
		require.Equal(t, len(out) > limit, over)
		require.Empty(t, r.data, "stdout was read to its end")
	})
}
