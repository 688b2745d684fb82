package band

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/band-once/bandonce/internal/wire"
)

// Endpoint names of the contact calls, as errors and logs show them.
const (
	EndpointContacts        = "GET /agent/contacts"
	EndpointAddContact      = "POST /agent/contacts/add"
	EndpointRemoveContact   = "POST /agent/contacts/remove"
	EndpointContactRequests = "GET /agent/contacts/requests"
	EndpointRespondContact  = "POST /agent/contacts/requests/respond"
)

// Contact is one of the agent's contacts (the document's AgentContact).
type Contact struct {
	ID     string `json:"id"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
	// Type is "User" or "Agent".
	Type       string    `json:"type"`
	IsExternal bool      `json:"is_external"`
	InsertedAt time.Time `json:"inserted_at,omitzero"`
}

// ContactRequest is a request to become contacts, as the agent received
// it (FromHandle, FromName) or sent it (ToHandle, ToName). Status is
// pending, approved, rejected or cancelled.
type ContactRequest struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	FromHandle string    `json:"from_handle,omitempty"`
	FromName   string    `json:"from_name,omitempty"`
	ToHandle   string    `json:"to_handle,omitempty"`
	ToName     string    `json:"to_name,omitempty"`
	Message    string    `json:"message,omitempty"`
	InsertedAt time.Time `json:"inserted_at,omitzero"`
}

// The actions RespondToContactRequest takes.
const (
	ContactApprove = "approve" // a request the agent received
	ContactReject  = "reject"  // a request the agent received
	ContactCancel  = "cancel"  // a request the agent sent
)

// StatusAnswered is the Status RespondToContactRequest reports for a
// request that was no longer pending.
const StatusAnswered = "answered"

const contactsPageSize = 100

// Contacts lists the agent's contacts, every page, each once. A page that
// brings no contact not read before, or more than MaxTaskPages pages,
// ends the walk with a *PagingError, logged once.
func (c *Client) Contacts(ctx context.Context) (_ []Contact, err error) {
	defer func() { c.warnPaging(err) }()
	var all []Contact
	seen := map[string]bool{}
	p := c.api.NewPager(EndpointContacts, "/agent/contacts", "1", MaxTaskPages)
	for page := 1; ; page++ {
		ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointContacts, Method: http.MethodGet, Path: "/agent/contacts",
			Query: url.Values{"page": {strconv.Itoa(page)}, "page_size": {strconv.Itoa(contactsPageSize)}}, Retry: true})
		if err != nil {
			return nil, err
		}
		var items []Contact
		if err := ans.Data(&items); err != nil {
			return nil, err
		}
		var meta struct {
			TotalPages int `json:"total_pages"`
		}
		if err := ans.Metadata(&meta); err != nil {
			return nil, err
		}
		fresh := 0
		for _, ct := range items {
			if key := contactKey(ct); !seen[key] {
				seen[key] = true
				all = append(all, ct)
				fresh++
			}
		}
		if page >= meta.TotalPages || len(items) == 0 {
			return all, nil
		}
		if err := p.AdvancePage(page, len(items), fresh); err != nil {
			return nil, err
		}
	}
}

// ContactRequests lists the pending requests the agent received and the
// ones it sent with sentStatus ("" is Band's default; "all" every status),
// the first page of each direction (up to 100 each).
func (c *Client) ContactRequests(ctx context.Context, sentStatus string) (received, sent []ContactRequest, err error) {
	q := url.Values{"page": {"1"}, "page_size": {strconv.Itoa(contactsPageSize)}}
	if sentStatus != "" {
		q.Set("sent_status", sentStatus)
	}
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointContactRequests, Method: http.MethodGet, Path: "/agent/contacts/requests", Query: q, Retry: true})
	if err != nil {
		return nil, nil, err
	}
	var data struct {
		Received []ContactRequest `json:"received"`
		Sent     []ContactRequest `json:"sent"`
	}
	if err := ans.Data(&data); err != nil {
		return nil, nil, err
	}
	return data.Received, data.Sent, nil
}

// AddContact sends a contact request to handle (with an optional
// message): Status "pending", or "approved" when the other side had asked
// already. Adding is a change of state: when Band answers 409 (a request
// pending, or a contact already) the one found is returned, so a repeat
// (a redelivery, a retry after a lost answer) has the effect of one.
func (c *Client) AddContact(ctx context.Context, handle, message string) (ContactRequest, error) {
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	body := map[string]any{"handle": handle}
	if message != "" {
		body["message"] = message
	}
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointAddContact, Method: http.MethodPost, Path: "/agent/contacts/add", Body: body, Retry: true})
	if err == nil {
		var r ContactRequest
		if err := ans.Data(&r); err != nil {
			return ContactRequest{}, err
		}
		r.ToHandle = handle
		return r, nil
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		return ContactRequest{}, err
	}
	if _, sent, lerr := c.ContactRequests(ctx, "pending"); lerr == nil {
		for _, r := range sent {
			if r.ToHandle == handle {
				return r, nil
			}
		}
	}
	if contacts, lerr := c.Contacts(ctx); lerr == nil {
		for _, ct := range contacts {
			if ct.Handle == handle {
				return ContactRequest{Status: "approved", ToHandle: handle, ToName: ct.Name}, nil
			}
		}
	}
	return ContactRequest{}, err
}

// RemoveContact ends the contact with handle, in both directions.
// Removing one that is no contact is not an error: when Band answers 404
// and the contact list does not have it, the call succeeds.
func (c *Client) RemoveContact(ctx context.Context, handle string) error {
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	_, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointRemoveContact, Method: http.MethodPost, Path: "/agent/contacts/remove",
		Body: map[string]string{"handle": handle}, Retry: true})
	var apiErr *APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
		return err
	}
	contacts, lerr := c.Contacts(ctx)
	if lerr != nil {
		return err
	}
	for _, ct := range contacts {
		if ct.Handle == handle {
			return err
		}
	}
	return nil
}

// RespondToContactRequest approves or rejects a request the agent
// received, or cancels one it sent (action ContactApprove, ContactReject,
// ContactCancel), named by the other party's handle. Answering is a change
// of state: a request no longer pending (answered by an earlier call, a
// retry after a lost answer, or the other side) answers 409, which is
// reported as Status StatusAnswered, not as an error.
func (c *Client) RespondToContactRequest(ctx context.Context, action, handle string) (ContactRequest, error) {
	handle = strings.TrimPrefix(strings.TrimSpace(handle), "@")
	ans, err := c.api.Do(ctx, wire.Call{Endpoint: EndpointRespondContact, Method: http.MethodPost, Path: "/agent/contacts/requests/respond",
		Body: map[string]string{"action": action, "handle": handle}, Retry: true})
	var apiErr *APIError
	switch {
	case err == nil:
		var r ContactRequest
		err := ans.Data(&r)
		return r, err
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict:
		return ContactRequest{Status: StatusAnswered}, nil
	}
	return ContactRequest{}, err
}

// contactKey is what makes a contact one: its id, else its handle.
func contactKey(ct Contact) string {
	if ct.ID != "" {
		return ct.ID
	}
	return "@" + ct.Handle
}
