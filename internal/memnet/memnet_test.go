package memnet_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/band-once/bandonce/internal/memnet"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPlainRequestReachesHandler(t *testing.T) {
	c := memnet.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-In"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(r.Method + " " + r.URL.Path + " " + string(b)))
	}))
	req, _ := http.NewRequest(http.MethodPost, "http://fake.invalid/a/b", strings.NewReader("hi"))
	req.Header.Set("X-In", "k")
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "k", resp.Header.Get("X-Echo"))
	assert.Equal(t, "POST /a/b hi", string(body))
}

func TestCancelledRequestReturnsWithoutWaitingForHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := memnet.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://fake.invalid/", nil)
		_, err := c.Do(req)
		require.ErrorIs(t, err, memnet.ErrHandlerAbandoned)
		synctest.Wait()
	})
}

func TestWebSocketUpgradeOverPipe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := memnet.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer conn.CloseNow()
			typ, msg, err := conn.Read(r.Context())
			if err != nil {
				return
			}
			_ = conn.Write(r.Context(), typ, append([]byte("echo "), msg...))
			_, _, _ = conn.Read(r.Context()) // wait for the client's close
		}))
		conn, _, err := websocket.Dial(t.Context(), "ws://fake.invalid/socket", &websocket.DialOptions{HTTPClient: c})
		require.NoError(t, err)
		require.NoError(t, conn.Write(t.Context(), websocket.MessageText, []byte("ping")))
		_, msg, err := conn.Read(t.Context())
		require.NoError(t, err)
		assert.Equal(t, "echo ping", string(msg))
		require.NoError(t, conn.Close(websocket.StatusNormalClosure, ""))
		synctest.Wait()
	})
}

func TestRefusedUpgradeIsAnOrdinaryResponse(t *testing.T) {
	c := memnet.Client(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"connection_conflict"}}`, http.StatusConflict)
	}))
	_, resp, err := websocket.Dial(t.Context(), "ws://fake.invalid/socket", &websocket.DialOptions{HTTPClient: c})
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusConflict, resp.StatusCode)
}
