package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/band-once/bandonce"
	"github.com/band-once/bandonce/internal/cmdlog"
	"github.com/band-once/bandonce/internal/procgroup"
)

// ExitPermanent is the exit status by which a command says the message can
// never be handled: the message is dead-lettered at once instead of after
// the retries. It is EX_DATAERR of sysexits.h ("the input data was
// incorrect").
const ExitPermanent = 65

// MaxReply bounds a command's output; a longer one is a permanent failure.
const MaxReply = 1 << 20

// trackEvery is how often a running command's descendants are noted, so
// that those it leaves behind can be found when it ends.
const trackEvery = 100 * time.Millisecond

// outputWait bounds the wait for a command's output to close once its
// group is dead: something outside the group may hold the pipe.
const outputWait = time.Second

// Command runs a program once per message.
type Command struct {
	registry
	argv     []string
	opts     Options
	env      envFilter
	template keyTemplate
}

// NewCommand returns the bridge for argv. The program is looked up now,
// so a typo fails at start, not at the first message.
func NewCommand(argv []string, opts Options) (*Command, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("bridge: no command")
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	t, err := parseKeyTemplate(opts.KeyTemplate)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	env, err := parseEnv(opts.Env)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	return &Command{argv: argv, opts: opts.withDefaults(), env: env, template: t}, nil
}

// Handle is the Shell's Handler: it runs the command for m.
func (c *Command) Handle(ctx context.Context, m *bandonce.Message) (*bandonce.Reply, error) {
	exe := newExecution(m)
	c.add(exe)
	defer c.remove(exe.ID)
	key := c.template.expand(m)
	out, err := c.run(ctx, m, key, exe)
	if err != nil {
		return nil, err
	}
	return reply(m, out, key, c.template), nil
}

// environ is the command's environment: what baseEnv lets through, and
// the message's.
func (c *Command) environ(m *bandonce.Message, key string) []string {
	return append(c.baseEnv(),
		"BAND_MESSAGE_ID="+m.ID,
		"BAND_ROOM_ID="+m.RoomID,
		"BAND_SENDER_ID="+m.SenderID,
		"BAND_ATTEMPT="+strconv.Itoa(m.Attempt),
		"BAND_DEDUP_KEY="+key,
	)
}

// pipes are the command's three standard streams; the bridge holds its
// ends itself, so that a grandchild holding one open can never keep the
// wait for the command from returning.
type pipes struct {
	stdinR, stdinW, outR, outW, errR, errW *os.File
}

func newPipes() (*pipes, error) {
	var p pipes
	var err error
	if p.stdinR, p.stdinW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.close()
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.close()
		return nil, err
	}
	return &p, nil
}

// closeChildEnds closes the ends the command inherited.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.stdinR, p.outW, p.errW} {
		if f != nil {
			_ = f.Close()
		}
	}
}

func (p *pipes) close() {
	p.closeChildEnds()
	for _, f := range []*os.File{p.stdinW, p.outR, p.errR} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// run runs the command for m and returns its standard output. A
// cancellation of ctx ends the whole group and returns the cause.
func (c *Command) run(ctx context.Context, m *bandonce.Message, key string, exe Execution) (string, error) {
	p, err := newPipes()
	if err != nil {
		return "", err
	}
	defer p.close()
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = c.environ(m, key)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.stdinR, p.outW, p.errW
	proc, err := procgroup.Start(cmd, procgroup.Options{DieWithParent: true})
	p.closeChildEnds()
	if err != nil {
		return "", fmt.Errorf("starting the command: %w", err)
	}
	log := c.opts.Logger.With("message", m.ID, "room", m.RoomID, "execution", exe.ID, "pid", proc.Pid())
	log.Debug("bandonce run: command started")

	go func() {
		_, _ = io.WriteString(p.stdinW, m.Body())
		_ = p.stdinW.Close()
	}()
	// Both streams are read to their end, whatever they hold: a command
	// blocked on a full pipe would hold its message for ever.
	var stdout []byte
	var tooLong bool
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		stdout, tooLong, _ = cmdlog.ReadReply(p.outR, MaxReply)
	}()
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		_ = cmdlog.ReadLines(p.errR, cmdlog.MaxLine, func(line []byte, cut int) {
			// The command's stderr goes to the log, line by line,
			// prefixed with the message it was working on.
			if cut == 0 {
				log.Info(m.ID + ": " + string(line))
				return
			}
			// A cut may fall inside the key: the logger's scrub would
			// not know the piece left at the end.
			log.Warn(m.ID+": "+c.opts.Key.ScrubCut(string(line))+" [cut]", "cut_bytes", cut)
		})
	}()

	// Whatever the command leaves running goes with it: its group, its
	// descendants, and (when bandonce run is their subreaper) the orphans
	// its children left.
	defer procgroup.ReapOrphans()
	track := time.NewTicker(trackEvery)
	defer track.Stop()
	for running := true; running; {
		select {
		case <-proc.Done():
			proc.Kill()
			running = false
		case <-track.C:
			proc.Track()
		case <-ctx.Done():
			cause := context.Cause(ctx)
			killed := proc.Terminate(c.opts.Grace)
			log.Info("bandonce run: command cancelled", "cause", cause, "sigkill_after_grace", killed)
			// Nothing it printed is used: the reply of a cancelled cycle
			// is never posted.
			drain(p, outDone, errDone)
			return "", errCancelled("the command", cause)
		}
	}
	drain(p, outDone, errDone)
	data := stdout
	if ctx.Err() != nil {
		// Cancelled as it exited: the cause decides, not the race.
		return "", errCancelled("the command", context.Cause(ctx))
	}
	switch code := proc.ExitCode(); {
	case code == 0:
	case code == ExitPermanent:
		return "", bandonce.Permanent(fmt.Errorf("the command exited %d: the message cannot be handled", code))
	default:
		return "", fmt.Errorf("the command failed (%s)", proc.ExitString())
	}
	if tooLong {
		return "", bandonce.Permanent(fmt.Errorf("the command printed more than %d bytes", MaxReply))
	}
	return string(data), nil
}

// drain waits for the command's output streams to close, for a bounded
// time: past it, something outside the group holds them open, and the
// bridge closes its ends.
func drain(p *pipes, outDone, errDone <-chan struct{}) {
	t := time.NewTimer(outputWait)
	defer t.Stop()
	expired := false
	for _, s := range []struct {
		done <-chan struct{}
		f    *os.File
	}{{outDone, p.outR}, {errDone, p.errR}} {
		if !expired {
			select {
			case <-s.done:
				continue
			case <-t.C:
				expired = true
			}
		}
		_ = s.f.Close()
		<-s.done
	}
}
