// Package bandtype defines the types that package bandonce (the shell)
// and package band (the client) share, where go doc shows their fields,
// as River's rivertype does for River. Package band names them too
// (band.APIError is bandtype.APIError), and package bandonce declares
// APIError with the same fields so that its go doc shows them (errors.As
// reads either as the other), so a program need not import this package
// to use them; it links nothing but the standard library.
package bandtype
