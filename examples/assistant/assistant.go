package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/band-once/bandonce/agentloop"
	"github.com/band-once/bandonce/internal/examplekit"
)

// System is the assistant's instructions.
const System = `You are the shop's support assistant on Band. When someone asks for a refund:
look the order up with order_status; track the work as a task on the room's board
(band_create_task, then band_update_task: in_progress, then completed with a comment);
refund it with refund, once; store what you learned as a memory about the sender
(band_store_memory); then answer the sender in one or two sentences. Refund only orders
that order_status says are refundable.`

// Order is an order as the shop's records have it.
type Order struct {
	ID         string `json:"id"`
	Item       string `json:"item"`
	Amount     string `json:"amount"`
	Status     string `json:"status"`
	Refundable bool   `json:"refundable"`
}

// orders are the shop's records, for order_status.
var orders = map[string]Order{
	"order-17": {ID: "order-17", Item: "a blue teapot", Amount: "42.00 EUR", Status: "delivered damaged", Refundable: true},
	"order-18": {ID: "order-18", Item: "two mugs", Amount: "18.50 EUR", Status: "in transit", Refundable: false},
}

// NewLoop is the assistant: model, its two tools (order_status, which
// reads the shop's records, and refund, which moves money through the
// payment API) and Band's tools (messages, events, participants, peers,
// memories, the board's tasks and goal).
func NewLoop(model agentloop.Model, pay examplekit.Payments) *agentloop.Loop {
	return &agentloop.Loop{
		Model:  model,
		System: System,
		Tools:  append([]agentloop.Tool{orderStatusTool(), refundTool(pay)}, agentloop.BandTools()...),
	}
}

// orderStatusTool reads an order. It changes nothing, and is journaled
// (the default) so that a replayed turn reads what the first delivery
// read.
func orderStatusTool() agentloop.Tool {
	return agentloop.Tool{
		Name:        "order_status",
		Description: "Look an order up: its item, amount, status and whether it may be refunded.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"order":{"type":"string","description":"The order's id, as order-17."}},"required":["order"],"additionalProperties":false}`),
		Run: func(ctx context.Context, c agentloop.Call) (string, error) {
			id, err := orderArg(c.Arguments)
			if err != nil {
				return "", err
			}
			o, ok := orders[id]
			if !ok {
				return "", agentloop.Refuse("no order is named " + id)
			}
			raw, err := json.Marshal(o)
			return string(raw), err
		},
	}
}

// refundTool refunds an order through the payment API: the one effect
// outside Band that must happen once. It is journaled, so its receipt is
// recorded and a replay does not call the API again; the call's
// idempotency key (its place in the turn) covers the window between the
// refund and the record, when a crash makes the step run again.
func refundTool(pay examplekit.Payments) agentloop.Tool {
	return agentloop.Tool{
		Name:        "refund",
		Description: "Refund an order in full. Moves money: call it once per order.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"order":{"type":"string","description":"The order's id, as order-17."}},"required":["order"],"additionalProperties":false}`),
		Run: func(ctx context.Context, c agentloop.Call) (string, error) {
			id, err := orderArg(c.Arguments)
			if err != nil {
				return "", err
			}
			o, ok := orders[id]
			switch {
			case !ok:
				return "", agentloop.Refuse("no order is named " + id)
			case !o.Refundable:
				return "", agentloop.Refuse(id + " may not be refunded: it is " + o.Status)
			}
			receipt, err := pay.Refund(ctx, c.IdempotencyKey, id)
			if err != nil {
				return "", err // transient: the turn ends, the redelivery calls again under the same key
			}
			return fmt.Sprintf("refunded %s (%s), receipt %s", id, o.Amount, receipt), nil
		},
	}
}

func orderArg(args json.RawMessage) (string, error) {
	var a struct {
		Order string `json:"order"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", agentloop.Refuse("bad arguments: " + err.Error())
	}
	id := strings.TrimSpace(a.Order)
	if id == "" || len(id) > 64 {
		return "", agentloop.Refuse("name the order, as order-17")
	}
	return id, nil
}
