package jsonreuse

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The reused decoder accepts exactly what json.Unmarshal accepts, and
// decodes it alike, body after body.
func TestAReusedDecoderAcceptsWhatUnmarshalAccepts(t *testing.T) {
	bodies := []string{
		`{"data":{"id":"m1","attempt_number":2}}`,
		`{"data":{"id":"m1"}}` + " \n\t\r",
		`{"data":{"id":"m1"}}x`,
		`{"data":{"id":"m1"}}}`,
		`{"data":{"id":"m1"}}]`,
		`{"data":{"id":"m1"}} {"data":{"id":"m2"}}`,
		`{"data":{"id":"m1"}`,
		`{"data":{"id":7}}`,
		`{"data":[1,2]}`,
		``,
		`   `,
		`null`,
		`{"data":null}`,
		`{"data":{"id":"é\u00e9\ud800"}}`,
		`{"data":{"id":"m1"}}` + "\v",
		`{"data":{"id":"m1"}}` + "\u00a0",
		`[]`,
		`123`,
		`{"data":{"id":"m3"}}`,
	}
	type envelope struct {
		Data *struct {
			ID            string `json:"id"`
			AttemptNumber int    `json:"attempt_number"`
		} `json:"data"`
	}
	for range 3 { // again, on decoders the earlier rounds left in the pool
		for _, body := range bodies {
			var want, got envelope
			wantOK := json.Unmarshal([]byte(body), &want) == nil
			gotOK := Unmarshal([]byte(body), &got)
			assert.Equal(t, wantOK, gotOK, "%q", body)
			if wantOK {
				assert.Equal(t, want, got, "%q", body)
			}
		}
	}
}
