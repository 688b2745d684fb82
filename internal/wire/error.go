package wire

import (
	"github.com/band-once/bandonce/bandtype"
	"github.com/band-once/bandonce/internal/keyguard"
)

// APIError is what every non-2xx answer becomes, whether or not its body
// was the documented JSON envelope. Its public home is package bandtype.
type APIError = bandtype.APIError

// scrubAPIError takes the key out of every field the server filled. Body
// is an excerpt, so a key cut short at its end goes too.
func scrubAPIError(e *APIError, key *keyguard.Secret) {
	e.Code = key.Scrub(e.Code)
	e.Message = key.Scrub(e.Message)
	e.RequestID = key.Scrub(e.RequestID)
	e.Body = key.ScrubCut(e.Body)
	if e.Details == nil {
		return
	}
	clean := make(map[string][]string, len(e.Details))
	for field, msgs := range e.Details {
		scrubbed := make([]string, len(msgs))
		for i, m := range msgs {
			scrubbed[i] = key.Scrub(m)
		}
		clean[key.Scrub(field)] = scrubbed
	}
	e.Details = clean
}
