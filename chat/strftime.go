package chat

import (
	"fmt"
	"strings"
	"time"
)

// strftime formats t as C's strftime does in the C locale, for the directives chat
// templates use (Llama 3.2: "%d %b %Y"): %a %A %b %B %c %d %D %e %F %H %I %j %m %M %p %S
// %T %y %Y %z %Z %%, with glibc's "-" flag for no padding. Unknown directives are kept as
// written.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) {
			pad = false
			i++
		}
		num := func(v, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, v)
			} else {
				fmt.Fprintf(&b, "%d", v)
			}
		}
		switch format[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'd':
			num(t.Day(), 2)
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'e':
			if pad {
				fmt.Fprintf(&b, "%2d", t.Day())
			} else {
				fmt.Fprintf(&b, "%d", t.Day())
			}
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			num((t.Hour()+11)%12+1, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'S':
			num(t.Second(), 2)
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
