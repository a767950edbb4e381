package caddymodule

import (
	"net/mail"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/timeblock/timeblock/accounts/ledger"
)

// parseSeller reads the `seller { ... }` block of the timeblock global
// options: who sells the seats, printed at the top of every receipt.
//
//	seller {
//		name    "Example Compute Ltd"
//		address "1 Main Street, Springfield"
//		email   billing@example.com
//		tax_id  "EU123456789"
//	}
//
// Every line is optional; address may be given on several lines (each
// address line adds one printed line).
func parseSeller(d *caddyfile.Dispenser, a *App) error {
	if a.Seller != nil {
		return d.Err("seller is already set")
	}
	if d.NextArg() {
		return d.Errf("seller takes a block, not %q: seller { name <text>; address <text>; email <address>; tax_id <text> }", d.Val())
	}
	s := new(ledger.Seller)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("seller %s needs a value, e.g. %s", opt, sellerExample[opt])
		}
		value := strings.Join(args, " ")
		switch opt {
		case "name":
			s.Name = value
		case "address":
			if s.Address != "" {
				s.Address += "\n"
			}
			s.Address += value
		case "email":
			if len(args) != 1 {
				return d.Errf("seller email takes one address, e.g. %s", sellerExample[opt])
			}
			if _, err := mail.ParseAddress(value); err != nil {
				return d.Errf("seller email %q is not an e-mail address, e.g. %s", value, sellerExample[opt])
			}
			s.Email = value
		case "tax_id":
			s.TaxID = value
		default:
			return d.Errf("unknown seller option %q (use name, address, email or tax_id)", opt)
		}
	}
	a.Seller = s
	return nil
}

var sellerExample = map[string]string{
	"name":    `name "Example Compute Ltd"`,
	"address": `address "1 Main Street, Springfield"`,
	"email":   "email billing@example.com",
	"tax_id":  `tax_id "EU123456789"`,
}
