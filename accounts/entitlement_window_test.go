package accounts

import (
	"testing"
	"time"
)

func TestEntitlementWindow(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 3, 2, h, m, 0, 0, time.UTC) }
	europe, americas := MaskOf([]Block{BlockEurope}), MaskOf([]Block{BlockAmericas})
	lane := func(pool string, hours HourMask, until time.Time, renews bool) Grant {
		return Grant{PoolID: pool, Model: "m", Hours: hours, Seats: 1, Until: until, Renews: renews}
	}
	cases := []struct {
		name           string
		grants         []Grant
		now            time.Time
		opened, closes time.Time
	}{
		{"inside a block", []Grant{lane("p", europe, time.Time{}, false)}, at(9, 30), at(8, 0), at(16, 0)},
		{"blocks back to back", []Grant{lane("p", europe, time.Time{}, false), lane("p", americas, time.Time{}, false)},
			at(17, 0), at(8, 0), time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)},
		{"another pool's hours do not count", []Grant{lane("p", europe, time.Time{}, false), lane("q", americas, time.Time{}, false)},
			at(9, 0), at(8, 0), at(16, 0)},
		{"the paid period ends inside", []Grant{lane("p", europe, at(12, 15), false)}, at(9, 30), at(8, 0), at(12, 15)},
		{"a renewing period end does not close it", []Grant{lane("p", europe, at(12, 15), true)}, at(9, 30), at(8, 0), at(16, 0)},
		{"another grant carries on past the end", []Grant{lane("p", europe, at(12, 15), false), lane("p", europe, time.Time{}, false)},
			at(9, 30), at(8, 0), at(16, 0)},
		{"every hour", []Grant{lane("p", HourMask(1<<24-1), time.Time{}, true)}, at(9, 30), time.Time{}, time.Time{}},
		{"closed", []Grant{lane("p", americas, time.Time{}, false)}, at(9, 30), time.Time{}, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &Entitlement{Grants: tc.grants}
			opened, closes := e.Window(tc.now, "p")
			if tc.name == "every hour" {
				if !closes.IsZero() {
					t.Errorf("closes %v, want never", closes)
				}
				return
			}
			if !opened.Equal(tc.opened) || !closes.Equal(tc.closes) {
				t.Errorf("window %v → %v, want %v → %v", opened, closes, tc.opened, tc.closes)
			}
		})
	}
	e := &Entitlement{Grants: []Grant{lane("p", europe, time.Time{}, false)}}
	if n := testing.AllocsPerRun(100, func() { e.Window(at(9, 30), "p") }); n != 0 {
		t.Errorf("Window allocates %v times", n)
	}
}
