package keyguard

import (
	"context"
	"fmt"
	"log/slog"
)

// Logger returns a logger that writes through l with the secret scrubbed
// from every record: its message and every attribute, whatever its kind
// (an error's message, a Stringer, a value fmt would print). It is the one
// door every log line of the shell passes through, so a key quoted by a
// server, a transport or a handler's panic never reaches l. Records below
// l's level cost nothing more. A secret too short to scrub returns l.
func Logger(l *slog.Logger, s *Secret) *slog.Logger {
	if !s.scrubs() {
		return l
	}
	return slog.New(&scrubHandler{next: l.Handler(), s: s})
}

type scrubHandler struct {
	next slog.Handler
	s    *Secret
}

func (h *scrubHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.s.Scrub(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &scrubHandler{next: h.next.WithAttrs(clean), s: h.s}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{next: h.next.WithGroup(h.s.Scrub(name)), s: h.s}
}

// attr returns a with the secret taken out of its value. A value that
// does not hold it keeps its kind, so handlers render it as before.
func (h *scrubHandler) attr(a slog.Attr) slog.Attr {
	a.Key = h.s.Scrub(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.s.Scrub(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		var text string
		switch x := v.Any().(type) {
		case error:
			text = x.Error()
		case []byte:
			text = string(x)
		default:
			text = fmt.Sprintf("%+v", x)
		}
		if h.s.In(text) {
			a.Value = slog.StringValue(h.s.Scrub(text))
		} else {
			a.Value = v
		}
	default:
		a.Value = v // numbers, times, durations: no room for a key
	}
	return a
}
