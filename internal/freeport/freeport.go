// Package freeport gives tests local TCP addresses that nothing listens on.
package freeport

import (
	"net"
	"net/url"
	"testing"
)

// Address is 127.0.0.1:<port> of a port free when it returns. The caller binds it
// next; another process taking it meanwhile is possible, but rare enough for tests.
func Address(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// URL is http://Address.
func URL(t testing.TB) url.URL {
	t.Helper()
	return url.URL{Scheme: "http", Host: Address(t)}
}
