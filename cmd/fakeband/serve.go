package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/band-once/bandonce/fakeband"
	"github.com/band-once/bandonce/internal/cmdlog"
)

// serve runs the fake Band until ctx ends.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fakeband serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "loopback `address` to listen on; port 0 picks a free one")
	scenarioPath := fs.String("scenario", "", "scenario `file` (JSON, see fakeband.Scenario); empty serves the ready-made one")
	seed := fs.Int64("seed", 0, "seed for ids and keys, overriding the scenario's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fakeband: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := checkLoopback(*addr); err != nil {
		fmt.Fprintln(stderr, "fakeband:", err)
		return exitUsage
	}
	scn, err := loadScenario(*scenarioPath)
	if err != nil {
		fmt.Fprintln(stderr, "fakeband:", strings.ReplaceAll(err.Error(), "\n", "\n  "))
		return exitUsage
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			scn.Seed = *seed
		}
	})

	band := fakeband.New(fakeband.Options{Seed: scn.Seed, Admin: true})
	defer band.Close()
	cast, err := scn.Apply(band)
	if err != nil {
		fmt.Fprintln(stderr, "fakeband:", err)
		return exitUsage
	}
	base, err := band.Listen(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "fakeband:", err)
		return exitError
	}
	printSetup(stdout, base, scn.Seed, cast)
	// stdout is the setup to paste; what happens while it serves is
	// logged to stderr as bandonce run logs.
	log := cmdlog.New(stderr, false)
	log.Info("fakeband: serving", "url", strings.TrimSuffix(base, fakeband.APIPrefix), "seed", scn.Seed)
	<-ctx.Done()
	if err := band.Close(); err != nil {
		log.Error("fakeband: closing failed", "err", err)
		return exitError
	}
	log.Info("fakeband: stopped")
	return exitOK
}

// checkLoopback refuses addresses other machines could reach: the admin
// API hands out every key and takes no credentials.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr %q is not a loopback address (127.0.0.1, ::1 or localhost): the admin API has no authentication", addr)
}

// maxScenario bounds a -scenario file: a scenario is people, rooms and a
// few faults, kilobytes.
const maxScenario = 8 << 20

func loadScenario(path string) (*fakeband.Scenario, error) {
	if path == "" {
		return fakeband.DefaultScenario(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxScenario+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxScenario {
		return nil, fmt.Errorf("%s is larger than a scenario may be (%d MiB)", path, maxScenario>>20)
	}
	scn, err := fakeband.ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not a valid scenario:\n%w", path, err)
	}
	return scn, nil
}

// printSetup tells the user what is being served and how to reach it.
// The env lines are "export NAME=value", ready to paste into a shell.
func printSetup(w io.Writer, base string, seed int64, cast *fakeband.Cast) {
	root := strings.TrimSuffix(base, fakeband.APIPrefix)
	ws := "ws" + strings.TrimPrefix(base, "http") + "/socket/websocket"
	names := map[string]string{cast.Owner.ID: cast.Owner.Name}
	for _, h := range cast.Humans {
		names[h.ID] = h.Name
	}
	for _, a := range cast.Agents {
		names[a.ID] = a.Name
	}

	fmt.Fprintf(w, "fakeband: serving the fake Band at %s (seed %d)\n\n", root, seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  REST API\t%s\n", base)
	fmt.Fprintf(tw, "  socket\t%s\n", ws)
	fmt.Fprintf(tw, "  admin API\t%s%s\n", root, fakeband.AdminPrefix)
	fmt.Fprintf(tw, "  console\t%s/\t(open it in a browser)\n", root)
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  operator\t%s\tid %s\tkey %s\t(owns every agent)\n", cast.Owner.Name, cast.Owner.ID, cast.Owner.Key)
	for _, h := range cast.Humans {
		fmt.Fprintf(tw, "  human\t%s\tid %s\tkey %s\thandle %s\n", h.Name, h.ID, h.Key, h.Handle)
	}
	for _, a := range cast.Agents {
		fmt.Fprintf(tw, "  agent\t%s\tid %s\tkey %s\thandle %s\n", a.Name, a.ID, a.Key, a.Handle)
	}
	for _, r := range cast.Rooms {
		var members []string
		for _, id := range r.MemberIDs {
			m := names[id]
			if id == r.OwnerID {
				m += " (owner)"
			}
			members = append(members, m)
		}
		fmt.Fprintf(tw, "  room\t%s\tid %s\tmembers: %s\n", r.Title, r.ID, strings.Join(members, ", "))
	}
	tw.Flush()
	if n := len(cast.Script); n > 0 {
		fmt.Fprintf(w, "\n  %d scripted message(s) are waiting on /next.\n", n)
	}
	for _, a := range cast.Agents {
		fmt.Fprintf(w, "\n# agent %s: paste into the agent's shell (docs/fakeband.md says which SDK reads which)\n", a.Name)
		fmt.Fprintf(w, "export BAND_API_KEY=%s\n", a.Key)
		fmt.Fprintf(w, "export BAND_AGENT_ID=%s\n", a.ID)
		fmt.Fprintf(w, "# band-once reads the REST root with /api/v1; Band's Python and TypeScript SDKs the host root\n")
		fmt.Fprintf(w, "export BAND_BASE_URL=%s\n", base)
		fmt.Fprintf(w, "export BAND_REST_URL=%s\n", root)
		fmt.Fprintf(w, "export BAND_WS_URL=%s\n", ws)
	}
	fmt.Fprintf(w, "\n# for the fakeband commands (fakeband say, stop, play, truth, ...)\n")
	fmt.Fprintf(w, "export FAKEBAND_URL=%s\n\n", root)
	if len(cast.Rooms) == 0 {
		fmt.Fprintln(w, "fakeband: ready. Ctrl-C stops.")
		return
	}
	fmt.Fprintf(w, "fakeband: ready; try: fakeband say -room %s hello. Ctrl-C stops.\n", shellQuote(cast.Rooms[0].Title))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
