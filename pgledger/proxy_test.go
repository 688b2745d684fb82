package pgledger

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// proxy stands between a pool and the test database on loopback, so a
// test can take the database away (cut) or delay its answers (hold), as
// an outage or a paused process would.
type proxy struct {
	ln     net.Listener
	target string

	mu  sync.Mutex
	cut bool
	// starting answers every new connection as a restarting server does
	// (FATAL 57P03, "the database system is starting up"); starts counts
	// those answers.
	starting bool
	starts   int
	// refused counts the connections refused while cut: the clients'
	// attempts to reach the database during an outage.
	refused int
	thaw    chan struct{} // closed when a hold ends
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// newProxy forwards a loopback port to dsn's server until cleanup.
func newProxy(t testing.TB, dsn string) *proxy {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = ln.Close()
		p.setHeld(false)
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

// pool connects to the database through the proxy, closed at cleanup.
// Options, if any, adjust its configuration.
func (p *proxy) pool(t testing.TB, dsn string, options ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	for _, o := range options {
		o(cfg)
	}
	addr := p.ln.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = addr.IP.String(), uint16(addr.Port)
	cfg.ConnConfig.Fallbacks = nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.refused++
			p.mu.Unlock()
			_ = client.Close() // the database is gone: refused at once
			continue
		}
		if p.starting {
			p.starts++
			p.mu.Unlock()
			p.wg.Go(func() { startingUp(client) })
			continue
		}
		p.mu.Unlock()
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(server, client, false) })
		p.wg.Go(func() { p.pipe(client, server, true) })
	}
}

// pipe copies from src to dst; answers (server to client) wait out a hold.
func (p *proxy) pipe(dst, src net.Conn, answers bool) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && answers {
			p.mu.Lock()
			thaw := p.thaw
			p.mu.Unlock()
			if thaw != nil {
				<-thaw
			}
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// setCut takes the database away (every connection closed, new ones
// refused) or gives it back.
// refusals returns how many connections were refused while cut.
func (p *proxy) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
	}
}

// setHeld holds the database's answers back (the statements still reach
// it and commit) or lets them through.
func (p *proxy) setHeld(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case held && p.thaw == nil:
		p.thaw = make(chan struct{})
	case !held && p.thaw != nil:
		close(p.thaw)
		p.thaw = nil
	}
}

// setStartingUp has new connections answered as by a server restarting,
// or forwarded again.
func (p *proxy) setStartingUp(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting = on
}

// startsRefused returns how many connections were answered "starting up".
func (p *proxy) startsRefused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// startingUp answers a client's startup as PostgreSQL does while it
// starts: FATAL 57P03, then the connection closes.
func startingUp(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	for {
		msg, err := be.ReceiveStartupMessage()
		if err != nil {
			return
		}
		if _, ok := msg.(*pgproto3.SSLRequest); !ok {
			break
		}
		if _, err := c.Write([]byte("N")); err != nil { // no TLS
			return
		}
	}
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03", Message: "the database system is starting up"})
	_ = be.Flush()
}
