// Command tipjar is a small Band agent with a side effect outside Band:
// every message that mentions it charges its sender a tip through a
// payment provider, once per message, and thanks them.
//
// It shows how an agent routes its side effects so that the verifier can
// judge them while the production binary links no test package: the
// handler takes a Payments interface the agent owns (tipjar.go), main
// passes the provider's client (here), and the test passes the verifier's
// External (tipjar_test.go). See docs/verify.md.
//
// Configuration comes from the environment: BAND_API_KEY (required),
// BAND_BASE_URL and BAND_WS_URL as for examples/echo, and PAYMENTS_URL,
// the provider's API root (required).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/band-once/bandonce"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tipjar:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	key, paymentsURL := os.Getenv("BAND_API_KEY"), os.Getenv("PAYMENTS_URL")
	if key == "" || paymentsURL == "" {
		return errors.New("set BAND_API_KEY to the agent's key and PAYMENTS_URL to the payment provider's API root")
	}
	shell, err := bandonce.New(bandonce.Config{
		APIKey:    key,
		BaseURL:   os.Getenv("BAND_BASE_URL"),
		SocketURL: os.Getenv("BAND_WS_URL"),
		Handler:   NewHandler(&provider{root: strings.TrimRight(paymentsURL, "/"), client: http.DefaultClient}),
	})
	if err != nil {
		return err
	}
	return shell.Run(ctx)
}

// provider is the payment provider's client: a charge is a POST carrying
// an Idempotency-Key header, and a charge can be looked up by that key.
type provider struct {
	root   string
	client *http.Client
}

func (p *provider) Charge(ctx context.Context, idempotencyKey, payer string, cents int) error {
	form := url.Values{"payer": {payer}, "amount": {fmt.Sprint(cents)}, "currency": {"eur"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.root+"/charges", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", idempotencyKey)
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("charge %s: the provider answered %s", idempotencyKey, resp.Status)
	}
	return nil
}

func (p *provider) Charged(ctx context.Context, idempotencyKey string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.root+"/charges/"+url.PathEscape(idempotencyKey), nil)
	if err != nil {
		return false, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	case resp.StatusCode/100 == 2:
		return true, nil
	}
	return false, fmt.Errorf("look up charge %s: the provider answered %s", idempotencyKey, resp.Status)
}
