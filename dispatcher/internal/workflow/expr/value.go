package expr

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// Inside the evaluator a value is nil, bool, float64, string, *array or *object. Arrays and
// objects are pointers because GitHub compares them by identity (`a == a` is true, two empty
// objects are not equal), and objects keep their key order because toJSON prints it.

// array is an array value. filtered marks the result of a `.*` / `[*]` filter: a further
// property or index applies to each of its elements.
type array struct {
	items    []any
	filtered bool
}

// object is an object value: keys in insertion order, looked up case-insensitively (the first
// of keys that differ only in case wins, as on GitHub).
type object struct {
	keys  []string
	vals  []any
	index map[string]int // lower-cased key → position
}

func newObject(n int) *object {
	return &object{keys: make([]string, 0, n), vals: make([]any, 0, n), index: make(map[string]int, n)}
}

// set adds key; a key already present (case-insensitively) keeps its place and first value,
// unless it is the very same spelling, which replaces the value (JSON's last-wins).
func (o *object) set(key string, v any) {
	lk := strings.ToLower(key)
	if i, ok := o.index[lk]; ok {
		if o.keys[i] == key {
			o.vals[i] = v
		}
		return
	}
	o.index[lk] = len(o.keys)
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, v)
}

func (o *object) get(key string) (any, bool) {
	i, ok := o.index[strings.ToLower(key)]
	if !ok {
		return nil, false
	}
	return o.vals[i], true
}

// internal converts a caller's value (what encoding/json decodes into, plus the ints, string
// maps and slices Go code tends to hold) into the evaluator's form. Maps have no order: their
// keys are taken sorted, so toJSON of a map is deterministic.
func internal(v any) (any, error) {
	switch t := v.(type) {
	case nil, bool, float64, string, *array, *object:
		return t, nil
	case int:
		return float64(t), nil
	case int64:
		return float64(t), nil
	case float32:
		return float64(t), nil
	case json.Number:
		return jsToNumber(string(t)), nil
	case []any:
		a := &array{items: make([]any, len(t))}
		for i, e := range t {
			c, err := internal(e)
			if err != nil {
				return nil, err
			}
			a.items[i] = c
		}
		return a, nil
	case []string:
		a := &array{items: make([]any, len(t))}
		for i, e := range t {
			a.items[i] = e
		}
		return a, nil
	case map[string]any:
		o := newObject(len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			c, err := internal(t[k])
			if err != nil {
				return nil, err
			}
			o.set(k, c)
		}
		return o, nil
	case map[string]string:
		o := newObject(len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			o.set(k, t[k])
		}
		return o, nil
	}
	// Other numbers, slices and string-keyed maps by reflection; anything else is refused.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), nil
	case reflect.Slice, reflect.Array:
		a := &array{items: make([]any, rv.Len())}
		for i := range rv.Len() {
			c, err := internal(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			a.items[i] = c
		}
		return a, nil
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			keys := make([]string, 0, rv.Len())
			for _, k := range rv.MapKeys() {
				keys = append(keys, k.String())
			}
			slices.Sort(keys)
			o := newObject(len(keys))
			for _, k := range keys {
				c, err := internal(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface())
				if err != nil {
					return nil, err
				}
				o.set(k, c)
			}
			return o, nil
		}
	}
	return nil, fmt.Errorf("a context holds a value of type %T, which is not a JSON value", v)
}

// external converts an evaluator value back into what encoding/json decodes into.
func external(v any) any {
	switch t := v.(type) {
	case *array:
		out := make([]any, len(t.items))
		for i, e := range t.items {
			out[i] = external(e)
		}
		return out
	case *object:
		out := make(map[string]any, len(t.keys))
		for i, k := range t.keys {
			out[k] = external(t.vals[i])
		}
		return out
	}
	return v
}

// kindName is GitHub's name of a value's kind, which is also what an array or object
// becomes when coerced to a string (format, join).
func kindName(v any) string {
	switch v.(type) {
	case nil:
		return "Null"
	case bool:
		return "Boolean"
	case float64:
		return "Number"
	case string:
		return "String"
	case *array:
		return "Array"
	case *object:
		return "Object"
	}
	return "Unknown"
}

func primitive(v any) bool {
	switch v.(type) {
	case *array, *object:
		return false
	}
	return true
}

func falsy(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case bool:
		return !t
	case float64:
		return t == 0 || math.IsNaN(t)
	case string:
		return t == ""
	}
	return false
}

// toNumber is GitHub's coercion to a number: null 0, booleans 1 and 0, strings as
// JavaScript's Number() reads them, arrays and objects NaN.
func toNumber(v any) float64 {
	switch t := v.(type) {
	case nil:
		return 0
	case bool:
		if t {
			return 1
		}
		return 0
	case float64:
		return t
	case string:
		return jsToNumber(t)
	}
	return math.NaN()
}

// coerceString is GitHub's coercion to a string: null "", numbers at most 15 decimals,
// arrays and objects their kind ("Array", "Object").
func coerceString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case bool:
		if t {
			return "true"
		}
		return "false"
	case float64:
		return numberString(t)
	case string:
		return t
	}
	return kindName(v)
}

// numberString formats a number the way GitHub coerces it to a string: rounded to 15
// decimals (so 0.84551240822557006 shows as 0.84551240822557), then JavaScript's shortest form.
func numberString(f float64) string {
	if f == 0 {
		return "0"
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 1e21 {
		return jsNumber(f)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 15, 64), 64)
	return jsNumber(r)
}

// jsNumber is JavaScript's Number.prototype.toString: the shortest digits that read back as
// f, in positional notation for exponents -7 < e < 21 and in exponent notation otherwise.
func jsNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		return "0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, expPart, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expPart)
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		return sign + digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return sign + digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return sign + "0." + strings.Repeat("0", -n) + digits
	}
	es := "+"
	if n-1 < 0 {
		es = "-"
	}
	ev := strconv.Itoa(abs(n - 1))
	if k == 1 {
		return sign + digits + "e" + es + ev
	}
	return sign + digits[:1] + "." + digits[1:] + "e" + es + ev
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// jsSpace is JavaScript's white space and line terminators (what Number() and String.trim drop).
func jsSpace(r rune) bool {
	return r == '\uFEFF' || (unicode.IsSpace(r) && r != '\u0085')
}

// jsToNumber is JavaScript's Number(string): surrounding white space ignored, "" is 0,
// decimal with optional sign and exponent, Infinity, 0x / 0o / 0b integers without sign;
// anything else NaN.
func jsToNumber(s string) float64 {
	s = strings.TrimFunc(s, jsSpace)
	if s == "" {
		return 0
	}
	switch s {
	case "Infinity", "+Infinity":
		return math.Inf(1)
	case "-Infinity":
		return math.Inf(-1)
	}
	if len(s) > 2 && s[0] == '0' {
		base := 0
		switch s[1] {
		case 'x', 'X':
			base = 16
		case 'o', 'O':
			base = 8
		case 'b', 'B':
			base = 2
		}
		if base != 0 {
			n, ok := new(big.Int).SetString(s[2:], base)
			if !ok || strings.ContainsAny(s[2:], "_+-") {
				return math.NaN()
			}
			f, _ := new(big.Float).SetInt(n).Float64()
			return f
		}
	}
	if !isDecimalLiteral(s) {
		return math.NaN()
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return math.NaN()
	}
	return f // out of range: ±Inf or 0, as JavaScript reads it
}

// isDecimalLiteral: [+-] (digits [. [digits]] | . digits) [(e|E) [+-] digits].
func isDecimalLiteral(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	intDigits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		intDigits++
	}
	fracDigits := 0
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			fracDigits++
		}
	}
	if intDigits == 0 && fracDigits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expDigits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return false
		}
	}
	return i == len(s)
}

// upper is GitHub's case folding for comparisons: upper case, except the dotless ı, which
// stays as it is (so ı and I differ, as do i and İ).
func upper(s string) string {
	return strings.Map(func(r rune) rune {
		if r == 'ı' {
			return r
		}
		return unicode.ToUpper(r)
	}, s)
}

// compareUTF16 orders strings by UTF-16 code units, as JavaScript's < does.
func compareUTF16(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] == rb[i] {
			continue
		}
		ua, ub := utf16Units(ra[i]), utf16Units(rb[i])
		if ua[0] != ub[0] {
			return int(ua[0]) - int(ub[0])
		}
		if len(ua) > 1 && len(ub) > 1 {
			return int(ua[1]) - int(ub[1])
		}
		return len(ua) - len(ub)
	}
	return len(ra) - len(rb)
}

func utf16Units(r rune) []uint16 {
	if r < 0x10000 {
		return []uint16{uint16(r)}
	}
	r1, r2 := utf16.EncodeRune(r)
	return []uint16{uint16(r1), uint16(r2)}
}

// coerceTypes brings two values to one kind for a comparison, as GitHub does (JavaScript's
// abstract equality, except that arrays and objects are never converted): a number against a
// string compares numbers; null and booleans become numbers.
func coerceTypes(l, r any) (any, any) {
	if kindName(l) == kindName(r) {
		return l, r
	}
	switch l.(type) {
	case float64:
		if s, ok := r.(string); ok {
			return l, jsToNumber(s)
		}
	case string:
		if _, ok := r.(float64); ok {
			return toNumber(l), r
		}
	case nil, bool:
		return coerceTypes(toNumber(l), r)
	}
	switch r.(type) {
	case nil, bool:
		return coerceTypes(l, toNumber(r))
	}
	return l, r
}

func equals(l, r any) bool {
	l, r = coerceTypes(l, r)
	if kindName(l) != kindName(r) {
		return false
	}
	switch lv := l.(type) {
	case nil:
		return true
	case float64:
		return lv == r.(float64) // NaN is never equal
	case string:
		return upper(lv) == upper(r.(string))
	case bool:
		return lv == r.(bool)
	case *array:
		return lv == r.(*array)
	case *object:
		return lv == r.(*object)
	}
	return false
}

// compare answers l > r (greater) or l < r (!greater) with GitHub's coercion; values of
// different kinds, arrays, objects and NaN are never ordered.
func compare(l, r any, greater bool) bool {
	l, r = coerceTypes(l, r)
	if kindName(l) != kindName(r) {
		return false
	}
	c := 0
	switch lv := l.(type) {
	case float64:
		rv := r.(float64)
		if math.IsNaN(lv) || math.IsNaN(rv) {
			return false
		}
		switch {
		case lv > rv:
			c = 1
		case lv < rv:
			c = -1
		}
	case string:
		c = compareUTF16(upper(lv), upper(r.(string)))
	case bool:
		rv := r.(bool)
		switch {
		case lv && !rv:
			c = 1
		case !lv && rv:
			c = -1
		}
	default:
		return false
	}
	if greater {
		return c > 0
	}
	return c < 0
}
