// Package bandtype defines the types that package bandonce (the shell)
// and package band (the client) share, where go doc shows their fields,
// as River's rivertype does for River. Both packages name them too
// (bandonce.APIError is bandtype.APIError), so a program need not import
// this package to use them; it links nothing but the standard library.
package bandtype
