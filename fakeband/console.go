package fakeband

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// The console: one page, served with the admin API at / and /console, that
// talks to the Band as a person does (say as any human, stop, play, break
// things) and shows each message's life. It is plain HTML, CSS and
// JavaScript embedded in the binary: no build step, nothing fetched from
// elsewhere (its Content-Security-Policy allows this origin only). It
// reads the admin API (setup, rooms, timeline, faults) and its live feed,
// and its own requests pass the admin API's guard: same origin, JSON
// bodies.

//go:embed console
var consoleFiles embed.FS

// consoleTypes are the content types of the console's files, by extension.
var consoleTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

func (b *Band) consoleRoutes(mux *http.ServeMux) {
	page := b.consoleFile("index.html")
	mux.HandleFunc("GET /{$}", page)
	mux.HandleFunc("GET /console", page)
	mux.HandleFunc("GET /console/{file}", func(w http.ResponseWriter, r *http.Request) {
		b.consoleFile(r.PathValue("file"))(w, r)
	})
}

// consoleFile serves one embedded file, behind the admin API's guard: a
// page on another site may not frame or fetch it, nor a rebound name
// load it.
func (b *Band) consoleFile(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if e := adminRefusal(r); e != nil {
			writeAdminError(w, e)
			return
		}
		typ, known := consoleTypes[path.Ext(name)]
		data, err := fs.ReadFile(consoleFiles, "console/"+name)
		if !known || err != nil {
			writeAdminError(w, notFound("console file "+name))
			return
		}
		h := w.Header()
		h.Set("Content-Type", typ)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		_, _ = w.Write(data)
	}
}
