// Package examplekit holds what the example agents (examples/tools and
// examples/assistant) share, so that each example keeps only what is its
// own: the fake payment API their refund tool calls (payments.go), the
// frame of their command (main.go: the -fake and -v flags, the signals,
// the serving and the ledger the environment names), and the -fake
// mode's in-process fake Band, its cast and the transcript it prints
// (fake.go).
package examplekit
