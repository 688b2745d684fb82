// Package jsonreuse decodes JSON bodies as json.Unmarshal does, with the
// decoding state kept from body to body.
package jsonreuse

import (
	"bytes"
	"encoding/json"
	"sync"
)

// A json.Decoder keeps its decoding state (the scanner's stack, the
// error context) from value to value, where json.Unmarshal makes them
// afresh for every body: five or six allocations a body. Unmarshal lends
// one from a pool to a single body at a time.
type reusedDecoder struct {
	src bytes.Reader
	dec *json.Decoder
}

var reusedDecoders = sync.Pool{New: func() any {
	d := new(reusedDecoder)
	d.dec = json.NewDecoder(&d.src)
	return d
}}

// maxReusedBody is the largest body whose decoder goes back to the pool:
// a decoder keeps a buffer the size of the largest body it read.
const maxReusedBody = 64 << 10

// Unmarshal decodes body into v as json.Unmarshal does, and reports
// whether that succeeded: body must be one JSON value with nothing but
// white space after it. On false v may be partly filled, as Unmarshal
// leaves it, and the caller decodes again with Unmarshal to learn why.
func Unmarshal(body []byte, v any) bool {
	d := reusedDecoders.Get().(*reusedDecoder)
	d.src.Reset(body)
	if d.dec.Decode(v) != nil || !d.restIsSpace() {
		return false // the decoder's state is in doubt: it is dropped
	}
	if len(body) <= maxReusedBody {
		reusedDecoders.Put(d)
	}
	return true
}

// restIsSpace reads what follows the value, the decoder's buffer and the
// body it has not read yet, and reports whether it is all white space.
// The white space stays in the buffer, where the next Decode skips it.
func (d *reusedDecoder) restIsSpace() bool {
	buffered := d.dec.Buffered().(*bytes.Reader)
	for _, r := range []*bytes.Reader{buffered, &d.src} {
		for {
			c, err := r.ReadByte()
			if err != nil {
				break
			}
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
		}
	}
	return true
}
