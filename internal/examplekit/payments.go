package examplekit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
)

// Payments is the external system the examples' refund tool changes: a payment API
// that honours idempotency keys, as Stripe's Idempotency-Key header does.
type Payments interface {
	// Refund refunds order and returns the refund's receipt. A second call
	// with the same idempotency key refunds nothing and returns the first
	// call's receipt.
	Refund(ctx context.Context, idempotencyKey, order string) (string, error)
}

// PaymentsClient calls a payment API over HTTP: POST {BaseURL}/refunds
// with an Idempotency-Key header and {"order": ...}, answered with
// {"id": ...}.
type PaymentsClient struct {
	BaseURL    string
	HTTPClient *http.Client
}

// maxPaymentsAnswer bounds the payment API's answer.
const maxPaymentsAnswer = 1 << 16

// Refund implements Payments.
func (c *PaymentsClient) Refund(ctx context.Context, idempotencyKey, order string) (string, error) {
	body, err := json.Marshal(map[string]string{"order": order})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+"/refunds", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("payments: refund %s: %w", order, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxPaymentsAnswer+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("payments: refund %s: reading the answer: %w", order, err)
	case len(raw) > maxPaymentsAnswer:
		return "", fmt.Errorf("payments: refund %s: the answer is over %d bytes", order, maxPaymentsAnswer)
	case resp.StatusCode/100 != 2:
		return "", fmt.Errorf("payments: refund %s: %s: %s", order, resp.Status, bytes.TrimSpace(raw))
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" {
		return "", fmt.Errorf("payments: refund %s: answer without an id: %q", order, raw)
	}
	return out.ID, nil
}

// PaymentsServer is a fake payment API for -fake and the tests: it serves
// POST /refunds, refunding once per idempotency key, and counts the
// refunds it made per order and the calls it got per key.
type PaymentsServer struct {
	mu      sync.Mutex
	refunds map[string]string // idempotency key -> receipt
	orders  map[string]int    // order -> refunds made
	calls   map[string]int    // idempotency key -> calls
}

// NewPaymentsServer returns an empty fake payment API.
func NewPaymentsServer() *PaymentsServer {
	return &PaymentsServer{refunds: map[string]string{}, orders: map[string]int{}, calls: map[string]int{}}
}

func (s *PaymentsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/refunds" {
		http.NotFound(w, r)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	var in struct {
		Order string `json:"order"`
	}
	if key == "" || json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&in) != nil || in.Order == "" {
		http.Error(w, `{"error":"an Idempotency-Key header and an order are required"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls[key]++
	id, seen := s.refunds[key]
	if !seen {
		s.orders[in.Order]++
		id = fmt.Sprintf("re_%d", len(s.refunds)+1)
		s.refunds[key] = id
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// Refunds returns how many refunds were made per order.
func (s *PaymentsServer) Refunds() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.orders)
}

// Calls returns how many calls each idempotency key got.
func (s *PaymentsServer) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}
