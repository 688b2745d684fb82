package bandonce

import (
	"context"
	"errors"
)

// Shell carries every message of the agent's rooms through Band's
// lifecycle exactly once. Create it with New and serve with Run.
type Shell struct {
	cfg settings
}

// New validates cfg and returns a Shell. It makes no request.
func New(cfg Config) (*Shell, error) {
	s, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Shell{cfg: s}, nil
}

// Run serves until ctx ends or a fatal error.
func (s *Shell) Run(ctx context.Context) error {
	return errors.New("not yet")
}
