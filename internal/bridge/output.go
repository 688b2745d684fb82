package bridge

import (
	"bufio"
	"bytes"
	"io"
)

// MaxLogLine bounds one line of a command's stderr in the log. The rest
// of a longer line is read and dropped, and the log says how many bytes
// were cut.
const MaxLogLine = 64 << 10

// readBuffer is how much of a line is read at once.
const readBuffer = 32 << 10

// readLines reads r to its end, calling emit for every line without its
// newline (and a carriage return before it), cut to max bytes; cut is how
// many bytes of the line were dropped. It never stops reading before r
// ends or fails, however long a line is, so the writer can never block on
// a full pipe. It returns r's error, nil at EOF.
func readLines(r io.Reader, max int, emit func(line []byte, cut int)) error {
	return readLinesSized(r, max, readBuffer, emit)
}

// readLinesSized is readLines reading up to size bytes at once.
func readLinesSized(r io.Reader, max, size int, emit func(line []byte, cut int)) error {
	br := bufio.NewReaderSize(r, size)
	var line []byte
	cut := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if room := max - len(line); room > 0 {
			take := min(room, len(chunk))
			line = append(line, chunk[:take]...)
			cut += len(chunk) - take
		} else {
			cut += len(chunk)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil:
			if cut > 0 {
				cut-- // the newline was cut with the rest
			} else {
				line = line[:len(line)-1]
			}
			emit(bytes.TrimSuffix(line, []byte("\r")), cut)
			line, cut = line[:0], 0
			continue
		}
		if len(line) > 0 || cut > 0 {
			emit(line, cut)
		}
		if err == io.EOF {
			return nil
		}
		// Drain what a failing reader may still give, then report it.
		_, _ = io.Copy(io.Discard, br)
		return err
	}
}

// readReply reads r to its end and returns its first max bytes; over
// says it held more. What follows max is read and dropped, so the writer
// never blocks on a full pipe.
func readReply(r io.Reader, max int) (data []byte, over bool, err error) {
	data, err = io.ReadAll(io.LimitReader(r, int64(max)+1))
	if len(data) > max {
		data, over = data[:max], true
	}
	if err == nil {
		_, err = io.Copy(io.Discard, r)
	} else {
		_, _ = io.Copy(io.Discard, r)
	}
	return data, over, err
}
