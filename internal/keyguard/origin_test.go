package keyguard_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/keyguard"
)

func TestARedirectToAnotherOriginIsRefusedBeforeTheKeyIsSent(t *testing.T) {
	var keysElsewhere atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" {
			keysElsewhere.Add(1)
		}
	}))
	defer elsewhere.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/stolen?x=1", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/here", http.StatusMovedPermanently)
		case "/here":
			_, _ = w.Write([]byte(r.Header.Get("X-Api-Key")))
		}
	}))
	defer home.Close()
	hc := keyguard.SameOriginRedirects(nil)

	req, _ := http.NewRequest(http.MethodGet, home.URL+"/away", nil)
	req.Header.Set("X-Api-Key", key)
	_, err := hc.Do(req)
	require.ErrorIs(t, err, keyguard.ErrCrossOriginRedirect)
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, ue.Err.Error(), elsewhere.URL, "names where it was sent")
	assert.NotContains(t, ue.Err.Error(), "/stolen", "but not the path or query (net/http quotes the whole URL itself)")
	assert.Zero(t, keysElsewhere.Load())

	req, _ = http.NewRequest(http.MethodGet, home.URL+"/moved", nil)
	req.Header.Set("X-Api-Key", key)
	resp, err := hc.Do(req)
	require.NoError(t, err, "a redirect on the same origin is followed")
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestSameOriginRedirectsKeepsTheClientsOwnPolicy(t *testing.T) {
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusFound)
	}))
	defer home.Close()
	mine := errors.New("no redirects for me")
	hc := keyguard.SameOriginRedirects(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return mine }})
	_, err := hc.Get(home.URL)
	assert.ErrorIs(t, err, mine)

	_, err = keyguard.SameOriginRedirects(nil).Get(home.URL)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stopped after 10 redirects", "a loop still ends")
	assert.Nil(t, http.DefaultClient.CheckRedirect, "the client given is not changed")
}

func TestInClear(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://app.band.ai/api/v1":           true,
		"ws://app.band.ai/api/v1/socket":      true,
		"http://10.0.0.5:4000/api/v1":         true,
		"http://127.0.0.2.nip.io/api/v1":      true,
		"https://app.band.ai/api/v1":          false,
		"wss://app.band.ai/api/v1/socket":     false,
		"http://127.0.0.1:4000/api/v1":        false,
		"http://127.9.9.9/api/v1":             false,
		"ws://[::1]:4000/api/v1/socket":       false,
		"http://[::ffff:127.0.0.1]:80/":       false,
		"http://localhost:4000/api/v1":        false,
		"http://LOCALHOST./api/v1":            false,
		"http://" + fakeband.Host + "/api/v1": false,
		"http://band.localhost:4000/":         false,
		"http://localhost.example.com/":       true,
		"http://notlocalhost/":                true,
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		assert.Equal(t, want, keyguard.InClear(u), raw)
	}
}

func TestKeyInURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"wss://h/socket?api_key=band_a_x":   true,
		"wss://h/socket?API_KEY=band_a_x":   true,
		"https://agent:band_a_x@h/api/v1":   true,
		"https://band_a_x@h/api/v1":         true,
		"wss://h/socket?on_conflict=reject": false,
		"https://app.band.ai/api/v1":        false,
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		assert.Equal(t, want, keyguard.KeyInURL(u), raw)
	}
}
