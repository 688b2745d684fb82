package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// postgresEnv names a PostgreSQL server's URL that bandonce verify -replicas
// uses when -postgres is not given (the tests' server, as .ci/run sets it).
const postgresEnv = "BANDONCE_TEST_POSTGRES"

// postgresBinEnv names the directory of PostgreSQL's server programs
// (initdb, pg_ctl) when they are neither on PATH nor under
// /usr/lib/postgresql/*/bin.
const postgresBinEnv = "BANDONCE_POSTGRES_BIN"

// errNoPostgres says what to do when no PostgreSQL is to be had.
var errNoPostgres = errors.New("-replicas needs PostgreSQL, for the replicas' shared ledger, and none was found: " +
	"pass -postgres postgres://USER@HOST:PORT/DB (a server on which it may create and drop databases), " +
	"set " + postgresEnv + " to such a URL, or install PostgreSQL's server programs " +
	"(Debian, Ubuntu: apt-get install postgresql; macOS: brew install postgresql; or point " + postgresBinEnv + " at the directory holding initdb and pg_ctl) " +
	"so that bandonce verify starts a throwaway server on loopback")

// serverBin finds the directory holding initdb and pg_ctl: postgresBinEnv
// when set, else PATH, else the newest /usr/lib/postgresql/*/bin.
func serverBin(getenv func(string) string) (string, error) {
	usable := func(dir string) bool {
		for _, prog := range []string{"initdb", "pg_ctl"} {
			if st, err := os.Stat(filepath.Join(dir, prog)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := getenv(postgresBinEnv); dir != "" {
		if !usable(dir) {
			return "", fmt.Errorf("%s=%q holds no initdb and pg_ctl; %w", postgresBinEnv, dir, errNoPostgres)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil && usable(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(a) - versionOf(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if usable(dirs[i]) {
			return dirs[i], nil
		}
	}
	return "", errNoPostgres
}

// versionOf reads the major version of /usr/lib/postgresql/VERSION/bin.
func versionOf(dir string) int {
	n, _ := strconv.Atoi(strings.SplitN(filepath.Base(filepath.Dir(dir)), ".", 2)[0])
	return n
}

// throwaway is a PostgreSQL server of bandonce verify's own, in a
// temporary directory, serving on loopback with trust authentication (it
// holds nothing but the replicas' ledgers).
type throwaway struct {
	bin, dir string
	owner    []string // the command prefix that runs as the cluster's owner
	url      string
}

// startThrowaway initialises a cluster in a temporary directory and
// starts it on a free loopback port. As root it runs the server as the
// postgres system user (PostgreSQL refuses to run as root).
func startThrowaway(ctx context.Context, getenv func(string) string) (*throwaway, error) {
	bin, err := serverBin(getenv)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bandonce-verify-pg-")
	if err != nil {
		return nil, err
	}
	tw := &throwaway{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, the throwaway PostgreSQL needs the postgres system user to run as (PostgreSQL refuses root): %w; or pass -postgres URL", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, the throwaway PostgreSQL needs runuser to run as the postgres user: %w; or pass -postgres URL", err)
		}
		tw.owner = []string{runuser, "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := tw.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		tw.remove()
		return nil, fmt.Errorf("initdb failed: %w\n%s", err, out)
	}
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			tw.remove()
			return nil, err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c max_connections=200 -c fsync=off", port, dir)
		out, err := tw.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
		if err == nil {
			tw.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			return tw, nil
		}
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		last = fmt.Errorf("pg_ctl start failed: %w\n%s%s", err, out, log)
	}
	tw.remove()
	return nil, last
}

func (tw *throwaway) run(ctx context.Context, prog string, args ...string) ([]byte, error) {
	argv := append(append(slices.Clone(tw.owner), filepath.Join(tw.bin, prog)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = tw.dir
	return cmd.CombinedOutput()
}

// stop shuts the server down and removes its directory.
func (tw *throwaway) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = tw.run(ctx, "pg_ctl", "-D", filepath.Join(tw.dir, "data"), "-m", "fast", "-w", "stop")
	tw.remove()
}

func (tw *throwaway) remove() { _ = os.RemoveAll(tw.dir) }

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
