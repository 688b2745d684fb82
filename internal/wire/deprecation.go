package wire

import (
	"context"
	"log/slog"
	"net/http"
)

// noteDeprecation logs, once per endpoint for the life of the doer, that
// Band marked an answer deprecated (its Deprecation header), with the
// Sunset date it gave: the call still works, and the operator learns
// before it stops working. Nothing is logged for an answer without one.
func (d *retryDoer) noteDeprecation(ctx context.Context, endpoint string, resp *http.Response) {
	if resp == nil || resp.Header.Get("Deprecation") == "" {
		return
	}
	if _, seen := d.deprecated.LoadOrStore(endpoint, true); seen {
		return
	}
	d.log.LogAttrs(ctx, slog.LevelWarn, "band: Band marks this call deprecated; it will stop working at its sunset",
		slog.String("endpoint", endpoint),
		slog.String("deprecation", resp.Header.Get("Deprecation")),
		slog.String("sunset", resp.Header.Get("Sunset")),
		slog.String("link", resp.Header.Get("Link")))
}
