package wire

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/band-once/bandonce/internal/keyguard"
)

// Endpoint names as they appear in errors and logs. They are templated, so
// no chat or message id ever reaches a log line through them.
const (
	EndpointMe         = "GET /agent/me"
	EndpointChats      = "GET /agent/chats"
	EndpointNext       = "GET /agent/chats/{id}/messages/next"
	EndpointProcessing = "POST /agent/chats/{id}/messages/{message_id}/processing"
	EndpointProcessed  = "POST /agent/chats/{id}/messages/{message_id}/processed"
	EndpointFailed     = "POST /agent/chats/{id}/messages/{message_id}/failed"
	EndpointPost       = "POST /agent/chats/{id}/messages"
	EndpointContext    = "GET /agent/chats/{id}/context"
)

// Paging limits Band documents: /agent/chats pages hold at most 100 rooms,
// /context pages at most 100 messages.
const (
	chatsPageSize   = 100
	maxContextLimit = 100
)

// MaxFailureReason is the most bytes of a failure reason Failed sends;
// longer reasons are cut on a UTF-8 boundary, because Band answers 422 to
// an error message it considers invalid.
const MaxFailureReason = 2000

// ErrInvalidID is returned, without any request being sent, when a chat or
// message id is empty or is a dot segment that would change the path.
var ErrInvalidID = errors.New("band: invalid id")

// Client calls Band's agent REST API. It is safe for concurrent use.
//
// The key travels only in the X-API-Key header. No error a Client returns
// shows it: the fields a server fills (an *APIError's, a *ProtocolError's)
// are scrubbed of it, and any other error whose message would quote it
// comes back wrapped, its message scrubbed, still matching errors.Is and
// errors.As.
type Client struct {
	base    string
	key     *keyguard.Secret
	doer    Doer
	maxBody int // 0 means MaxBodyBytes
}

// SetMaxBodyBytes sets the cap on a response body: an answer past it is
// not read whole but becomes a *TooLargeError. n <= 0 means MaxBodyBytes;
// a cap above MaxBodyCap (math.MaxInt, say, for "no cap") means
// MaxBodyCap. Call it before the Client is used.
func (c *Client) SetMaxBodyBytes(n int) { c.maxBody = min(max(n, 0), MaxBodyCap) }

// MaxBodyCap is the largest cap SetMaxBodyBytes keeps: far past any
// memory, and small enough that reading on past it (overread times the
// cap, and a byte) cannot overflow an int.
const MaxBodyCap = math.MaxInt/overread - 1

func (c *Client) bodyLimit() int {
	if c.maxBody > 0 {
		return c.maxBody
	}
	return MaxBodyBytes
}

// NewClient returns a Client for baseURL (such as
// "https://app.band.ai/api/v1") that authenticates with apiKey and sends
// every request through d. A nil d sends each request once with
// http.DefaultClient.
func NewClient(baseURL, apiKey string, d Doer) *Client {
	if d == nil {
		d = NewRetryDoer(nil, RetryOptions{MaxAttempts: 1})
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), key: keyguard.New(apiKey), doer: d}
}

// scrub is deferred by every exported method: it takes the key out of
// the error the method returns, however it was made.
func (c *Client) scrub(err *error) {
	if *err == nil {
		return
	}
	var apiErr *APIError
	if errors.As(*err, &apiErr) {
		scrubAPIError(apiErr, c.key)
	}
	var big *TooLargeError
	if errors.As(*err, &big) {
		big.scrub(c.key)
	}
	var protoErr *ProtocolError
	if errors.As(*err, &protoErr) {
		protoErr.Reason = c.key.Scrub(protoErr.Reason)
		protoErr.Body = c.key.ScrubCut(protoErr.Body)
	}
	*err = c.key.Error(*err)
}

// Me returns the agent the API key belongs to. It doubles as a key check:
// a rejected key is an *APIError with Status 401 or 403.
func (c *Client) Me(ctx context.Context) (_ *Agent, err error) {
	defer c.scrub(&err)
	res, err := c.send(ctx, request{endpoint: EndpointMe, method: http.MethodGet, path: "/agent/me", retry: true})
	if err != nil {
		return nil, err
	}
	a, err := decode[Agent](res)
	if err != nil {
		return nil, err
	}
	if a.ID == "" {
		return nil, res.protocolError("agent has no id")
	}
	return a, nil
}

// Chats returns every room the agent is in, walking all pages of
// /agent/chats. A room listed on two pages (the list shifted while it was
// read) is returned once.
func (c *Client) Chats(ctx context.Context) (_ []Chat, err error) {
	defer c.scrub(&err)
	var all []Chat
	seen := make(map[string]bool)
	p := c.newPager(EndpointChats, "/agent/chats", "1")
	for page := 1; ; page++ {
		chats, totalPages, err := c.chatsPage(ctx, page)
		if err != nil {
			return nil, err
		}
		fresh := 0
		for _, ch := range chats {
			if !seen[ch.ID] {
				seen[ch.ID] = true
				all = append(all, ch)
				fresh++
			}
		}
		if page >= totalPages || len(chats) == 0 {
			return all, nil
		}
		if err := p.AdvancePage(page, len(chats), fresh); err != nil {
			return nil, err
		}
	}
}

func (c *Client) chatsPage(ctx context.Context, page int) ([]Chat, int, error) {
	q := url.Values{}
	q.Set("page", strconv.Itoa(page))
	q.Set("page_size", strconv.Itoa(chatsPageSize))
	res, err := c.send(ctx, request{endpoint: EndpointChats, method: http.MethodGet, path: "/agent/chats", query: q, retry: true})
	if err != nil {
		return nil, 0, err
	}
	var chats []Chat
	if err := res.decodeData(&chats); err != nil {
		return nil, 0, err
	}
	for _, ch := range chats {
		if ch.ID == "" {
			return nil, 0, res.protocolError("chat has no id")
		}
	}
	// Missing metadata means a single page: the rooms already read are
	// still right, and nothing says there are more.
	var meta struct {
		TotalPages int `json:"total_pages"`
	}
	if err := res.decodeMetadata(&meta); err != nil {
		return nil, 0, err
	}
	return chats, meta.TotalPages, nil
}

// Next returns the oldest message of chatID that still needs this agent's
// work, or (nil, nil) when Band answers 204: nothing to do, or the agent
// is stopped in that room.
func (c *Client) Next(ctx context.Context, chatID string) (_ *Message, err error) {
	defer c.scrub(&err)
	if err := checkIDs(EndpointNext, chatID); err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointNext, method: http.MethodGet,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/messages/next", retry: true, skim: true})
	if err != nil {
		return nil, err
	}
	if res.status == http.StatusNoContent {
		return nil, nil
	}
	if s, ok := decodeFast[servedMessage](res); ok {
		if m, ok := s.message(); ok {
			return &m, nil
		}
	}
	var m Message
	if err := res.decodeData(&m); err != nil {
		return nil, err
	}
	if err := res.checkMessage(res.data, &m, "data"); err != nil {
		return nil, err
	}
	return &m, nil
}

// Processing opens a new processing attempt on a message. It is not an
// exclusive claim: every call opens another attempt.
func (c *Client) Processing(ctx context.Context, chatID, msgID string) (_ *Mark, err error) {
	defer c.scrub(&err)
	m, res, err := c.mark(ctx, EndpointProcessing, chatID, msgID, "processing", nil)
	if err != nil {
		return nil, err
	}
	if m.AttemptNumber < 1 {
		return nil, res.protocolError("processing mark has attempt_number " + strconv.Itoa(m.AttemptNumber) + ", want >= 1")
	}
	return m, nil
}

// Processed closes the open attempt as a success. Band answers 422 when no
// attempt is open.
func (c *Client) Processed(ctx context.Context, chatID, msgID string) (_ *Mark, err error) {
	defer c.scrub(&err)
	m, _, err := c.mark(ctx, EndpointProcessed, chatID, msgID, "processed", nil)
	return m, err
}

// Failed closes the open attempt as a failure with reason, scrubbed of
// the key and cut to MaxFailureReason bytes. Band keeps failed messages
// in /next, and shows the reason to whoever reads the room.
func (c *Client) Failed(ctx context.Context, chatID, msgID, reason string) (_ *Mark, err error) {
	defer c.scrub(&err)
	body, err := json.Marshal(struct {
		Error string `json:"error"`
	}{truncateUTF8(c.key.Scrub(reason), MaxFailureReason)})
	if err != nil {
		return nil, err
	}
	m, _, err := c.mark(ctx, EndpointFailed, chatID, msgID, "failed", body)
	return m, err
}

func (c *Client) mark(ctx context.Context, endpoint, chatID, msgID, verb string, body []byte) (*Mark, *response, error) {
	if err := checkIDs(endpoint, chatID, msgID); err != nil {
		return nil, nil, err
	}
	res, err := c.send(ctx, request{endpoint: endpoint, method: http.MethodPost,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/messages/" + url.PathEscape(msgID) + "/" + verb,
		body: body, retry: true})
	if err != nil {
		return nil, nil, err
	}
	if res.status != http.StatusNoContent {
		if m, ok := flatMark(res.body); ok {
			return m, res, nil
		}
	}
	m, err := decode[Mark](res)
	if err != nil {
		return nil, nil, err
	}
	return m, res, nil
}

// Post sends a text message to chatID. It is sent exactly once, never
// retried below the caller: Band has no idempotency key, so a repeated
// POST would be a second message.
func (c *Client) Post(ctx context.Context, chatID, content string, mentions []Mention) (_ *Posted, err error) {
	defer c.scrub(&err)
	if err := checkIDs(EndpointPost, chatID); err != nil {
		return nil, err
	}
	if mentions == nil {
		mentions = []Mention{} // Band wants an array, never null.
	}
	var payload struct {
		Message struct {
			Content  string    `json:"content"`
			Mentions []Mention `json:"mentions"`
		} `json:"message"`
	}
	payload.Message.Content = content
	payload.Message.Mentions = mentions
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	res, err := c.send(ctx, request{endpoint: EndpointPost, method: http.MethodPost,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/messages", body: body, retry: false})
	if err != nil {
		return nil, err
	}
	p, err := decode[Posted](res)
	if err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, res.protocolError("posted message has no id")
	}
	return p, nil
}

// Context returns one page of the agent's view of chatID, oldest first,
// starting at cursor ("" for the first page). limit 0 asks for the
// server's default page size; a limit above 100 is sent as 100.
func (c *Client) Context(ctx context.Context, chatID, cursor string, limit int) (_ *ContextPage, err error) {
	defer c.scrub(&err)
	return c.context(ctx, chatID, cursor, limit, true)
}

// context is Context; measure false gives up on a body over the cap as
// soon as it is seen to be, without reading on to learn its size.
func (c *Client) context(ctx context.Context, chatID, cursor string, limit int, measure bool) (*ContextPage, error) {
	if err := checkIDs(EndpointContext, chatID); err != nil {
		return nil, err
	}
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(min(limit, maxContextLimit)))
	}
	res, err := c.send(ctx, request{endpoint: EndpointContext, method: http.MethodGet,
		path: "/agent/chats/" + url.PathEscape(chatID) + "/context", query: q, retry: true, skipMeasure: !measure, skim: measure && limit == 1})
	if err != nil {
		return nil, err
	}
	page, err := res.contextItems()
	if err != nil {
		return nil, err
	}
	page.bytes = len(res.body)
	// The reply guard reads the whole room through these pages, so a page
	// that cannot say whether more follow is an error, not a last page.
	if !res.hasMetadata() {
		return nil, res.protocolError("context page has no metadata")
	}
	var meta struct {
		NextCursor *string `json:"next_cursor"`
		HasMore    *bool   `json:"has_more"`
	}
	if err := res.decodeMetadata(&meta); err != nil {
		return nil, err
	}
	if meta.HasMore == nil {
		return nil, res.protocolError("context metadata has no has_more")
	}
	if *meta.HasMore {
		if meta.NextCursor == nil || *meta.NextCursor == "" {
			return nil, res.protocolError("context has_more without next_cursor")
		}
		page.HasMore, page.NextCursor = true, *meta.NextCursor
	}
	return page, nil
}

// checkIDs refuses ids that would send the request somewhere else: an
// empty segment or a dot segment that a server would resolve away.
func checkIDs(endpoint string, ids ...string) error {
	for _, id := range ids {
		if id == "" || id == "." || id == ".." {
			return &invalidIDError{endpoint: endpoint, id: id}
		}
	}
	return nil
}

type invalidIDError struct {
	endpoint string
	id       string
}

func (e *invalidIDError) Error() string {
	return "band: " + e.endpoint + ": invalid id " + strconv.Quote(e.id)
}

func (e *invalidIDError) Unwrap() error { return ErrInvalidID }

// contextItems decodes a context page's messages: in one pass when every
// item is well formed, else item by item, naming the first bad one.
func (r *response) contextItems() (*ContextPage, error) {
	if items, ok := decodeFast[[]servedMessage](r); ok {
		page := &ContextPage{Items: make([]Message, len(*items))}
		fast := true
		for i := range *items {
			if page.Items[i], fast = (*items)[i].message(); !fast {
				break
			}
		}
		if fast {
			return page, nil
		}
	}
	var items []json.RawMessage
	if err := r.decodeData(&items); err != nil {
		return nil, err
	}
	page := &ContextPage{Items: make([]Message, len(items))}
	for i, raw := range items {
		where := "data[" + strconv.Itoa(i) + "]"
		if err := r.decodeInto(raw, &page.Items[i], where); err != nil {
			return nil, err
		}
		if err := r.checkMessage(raw, &page.Items[i], where); err != nil {
			return nil, err
		}
	}
	return page, nil
}
