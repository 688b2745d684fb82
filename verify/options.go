package verify

// Environment variables that override the options, so a failing seed can
// be replayed, or a run made longer, without editing the test.
const (
	// EnvSchedules sets the schedules per check (Schedules).
	EnvSchedules = "BANDONCE_VERIFY_SCHEDULES"
	// EnvSeed sets the first schedule's seed (Seed).
	EnvSeed = "BANDONCE_VERIFY_SEED"
	// EnvCheck limits ExactlyOnce to the named checks, comma-separated
	// (for example "kill-after-post"), as a replay line does.
	EnvCheck = "BANDONCE_VERIFY_CHECK"
)

// Defaults.
const (
	// DefaultSchedules is how many schedules each check runs.
	DefaultSchedules = 20
	// DefaultSeed is the first schedule's seed: band-once 0.1's master seed.
	DefaultSeed int64 = 20260616
)

// Option configures a check. Options are made by the functions of this
// package only.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is every option, resolved.
type config struct {
	schedules   int
	seed        int64
	mayNotReply bool
	noEffect    bool
	noControl   bool
	ownState    bool
	durable     bool
	maxAttempts int
	only        map[string]bool
	// fromEnv records which settings the environment overrode, for logs;
	// envErrs the variables it could not use, which fail every check.
	fromEnv []string
	envErrs []string
}

// Schedules sets how many seeded schedules each check runs (default
// DefaultSchedules; BANDONCE_VERIFY_SCHEDULES overrides it).
func Schedules(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.schedules = n
		}
	})
}

// Seed sets the seed of each check's first schedule; schedule i has seed
// s+i (default DefaultSeed; BANDONCE_VERIFY_SEED overrides it).
func Seed(s int64) Option { return optionFunc(func(c *config) { c.seed = s }) }

// MayNotReply declares that the agent may consume a message without
// replying. A message processed with no reply is then not counted as lost;
// every other rule stands.
func MayNotReply() Option { return optionFunc(func(c *config) { c.mayNotReply = true }) }

// MayPerformNoEffect declares that a message may be answered without any
// side effect, for agents whose effects depend on what a message says.
// Without it, an agent that performs effects must perform at least one
// for every message it answers; every other rule stands.
func MayPerformNoEffect() Option { return optionFunc(func(c *config) { c.noEffect = true }) }

// KeepsDurableState declares that the agent remembers what it did in a
// durable store of its own that the verifier cannot see (a database
// table of effects done). Without it, a life that skips an effect an
// earlier life performed, without asking External, Band or its ledger,
// is judged to remember what a real crash loses (a package-level
// variable, a cache its lives share); every other rule stands.
func KeepsDurableState() Option { return optionFunc(func(c *config) { c.ownState = true }) }

// DurableLedger gives the Shell adapter's lives one in-process ledger per
// schedule, kept across that schedule's lives (kills, supersedes) as a
// database outlives a crash, and reported durable: for an agent whose
// deployment has a durable Ledger (package boltledger, pgledger), so that
// what it records in a Message.Step is there after a crash, as it will
// be in production. Each schedule, and each re-run that shrinks one,
// starts with an empty ledger. Without it every life gets a fresh
// MemoryLedger, as a process that keeps its ledger in memory does. A
// Ledger set in the Shell's Config wins over this option.
func DurableLedger() Option { return optionFunc(func(c *config) { c.durable = true }) }

// NoControlSignals declares that the agent keeps no socket, so it cannot
// hear interrupt, stop, play or supersede. The checks that need them say
// so in Result.NotApplicable instead of running; the other checks leave
// control signals out.
func NoControlSignals() Option { return optionFunc(func(c *config) { c.noControl = true }) }

// MaxAttempts declares the agent's handler-failure budget: how many failed
// deliveries a message may take before the agent gives up on it (for a
// Shell, its Config.MaxAttempts). Without it the verifier assumes 3 (the
// Shell's own default is 10). The external system never fails one unit
// of work that often, so a message given up on is a violation.
func MaxAttempts(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxAttempts = n
		}
	})
}

func newConfig(opts []Option) *config {
	c := &config{schedules: DefaultSchedules, seed: DefaultSeed, maxAttempts: 3}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	c.fromEnvironment()
	return c
}
