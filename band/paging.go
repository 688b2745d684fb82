package band

import "github.com/band-once/bandonce/internal/wire"

// cursorMeta is a cursor-paged listing's metadata.
type cursorMeta struct {
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// next is where the listing's next page starts, "" after its last page.
// A page that says more follow but names no cursor cannot be followed,
// and ending there would cut the listing short in silence: it is an error.
func (m cursorMeta) next(ans *wire.Answer) (string, error) {
	if !m.HasMore {
		return "", nil
	}
	if m.NextCursor == nil || *m.NextCursor == "" {
		return "", ans.Protocol("has_more without next_cursor")
	}
	return *m.NextCursor, nil
}
