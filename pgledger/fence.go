package pgledger

import (
	"net/http"
)

// Transport returns an http.RoundTripper that sends each request through
// base (http.DefaultTransport when nil) only while this Ledger's lease
// still holds by this process's clock, and fails it with a *FencedError
// otherwise. Give it to the shell as its HTTP client's transport:
//
//	HTTPClient: &http.Client{Transport: ledger.Transport(nil)},
//
// The ledger's fence already keeps a former holder from posting; this one
// keeps it from sending anything at all once it woke from a pause past its
// lease: no processed mark, no /next, and no socket reconnection that
// would make Band supersede the new holder's connection. A request already
// on the wire when the process was paused is beyond any client's reach.
func (l *Ledger) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &fencedTransport{ledger: l, base: base}
}

type fencedTransport struct {
	ledger *Ledger
	base   http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if reason := t.ledger.lease.Short(0); reason != "" {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper must close it, even on error
		}
		return nil, t.ledger.fenced(req.Method+" "+req.URL.Path, reason)
	}
	return t.base.RoundTrip(req)
}
