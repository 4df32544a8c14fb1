package schema

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/errs"
)

// The Scanner below replaces encoding/json's Decoder.Token on the predict
// path. Why a hand-written scanner and not a library: the contract is not
// only "valid JSON in, values out" but every error of the token decoder,
// byte for byte: the scanner's message ("invalid character 'x' after object
// key:value pair"), the offset Decoder.InputOffset reports after the failed
// Token (the start of the offending value, or the end of the last token at
// end of input), and the order in which a streaming reader meets problems
// (a duplicate key is reported before a syntax error further on). The
// fast JSON libraries on the module proxy (valyala/fastjson, tidwall/gjson,
// goccy/go-json, bytedance/sonic) have messages and offsets of their own, so
// keeping the contract with any of them would mean re-running encoding/json
// on every error body, and their streaming token APIs (goccy/go-json's
// Decoder.Token) hand tokens back as interface values, which allocates per
// token again. They were not benchmarked side by side: the contract rules
// them out before speed does. The scanner is a few hundred lines, mirrors
// Decoder.Token's state machine state for state, and FuzzDecodeSame (in
// internal/server: /v1 bodies) and FuzzOIPDecodeSame (in internal/oip: OIP
// REST bodies and binary requests' JSON headers, which read it with Token
// alone) hold it to the token decoder on every input.
//
// Cost model: the body is copied once into a string; keys, number literals
// and strings without escapes are substrings of that copy (no allocation
// per token); a string with an escape or invalid UTF-8 is unquoted by
// encoding/json itself so that its text (replacement characters included)
// is exactly the old one. Members and array items are carved out of shared
// slabs, so a 1,000-row body costs a handful of allocations.

// tokState mirrors encoding/json's Decoder token states.
type tokState uint8

const (
	tokTopValue tokState = iota
	tokArrayStart
	tokArrayValue
	tokArrayComma
	tokObjectStart
	tokObjectKey
	tokObjectColon
	tokObjectValue
	tokObjectComma
)

// TokenKind says what a scanned token is.
type TokenKind uint8

// Token kinds.
const (
	TokDelim TokenKind = iota + 1
	TokString
	TokNumber
	TokBool
	TokNull
)

// Token is one token of a Scanner: a delimiter ({ } [ ]), a string (its
// unescaped text), a number (its literal), a boolean or null.
type Token struct {
	Kind  TokenKind
	Delim byte
	Text  string
	Bool  bool
}

// Scanner reads one JSON text token by token with the semantics and errors
// of encoding/json's Decoder.Token (UseNumber set) as JSONToken reports
// them, without allocating per token.
type Scanner struct {
	src      string
	pos      int // the end of the last consumed byte (Decoder.InputOffset)
	state    tokState
	stack    []tokState
	stackBuf [8]tokState

	cur      []Member  // the instance being read
	curBuf   [8]Member // cur's first array: no growth for a usual instance
	last     Instance  // the last instance read, whose names are distinct
	inOrder  bool      // cur's names so far are last's, in last's order
	slab     []Member  // members of finished instances are carved from here
	items    []string  // the array being read
	itemSlab []string
}

// NewScanner returns a scanner over a copy of body.
func NewScanner(body []byte) *Scanner {
	s := &Scanner{src: string(body)}
	s.stack = s.stackBuf[:0]
	s.cur = s.curBuf[:0]
	return s
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// peek skips white space and returns the next byte; at the end of input it
// leaves pos where it was, as Decoder.peek does.
func (s *Scanner) peek() (byte, bool) {
	for i := s.pos; i < len(s.src); i++ {
		if c := s.src[i]; !isSpace(c) {
			s.pos = i
			return c, true
		}
	}
	return 0, false
}

// More reports whether there is another element in the current array or
// object (Decoder.More).
func (s *Scanner) More() bool {
	c, ok := s.peek()
	return ok && c != ']' && c != '}'
}

// Rest reports whether anything but white space follows (the trailing-data
// check: Decoder.Token returns io.EOF only on white space).
func (s *Scanner) Rest() bool {
	_, ok := s.peek()
	return ok
}

func (s *Scanner) valueAllowed() bool {
	switch s.state {
	case tokTopValue, tokArrayStart, tokArrayValue, tokObjectValue:
		return true
	}
	return false
}

func (s *Scanner) valueEnd() {
	switch s.state {
	case tokArrayStart, tokArrayValue:
		s.state = tokArrayComma
	case tokObjectValue:
		s.state = tokObjectComma
	}
}

func (s *Scanner) push(st tokState) {
	s.stack = append(s.stack, s.state)
	s.state = st
}

func (s *Scanner) pop() {
	s.state = s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	s.valueEnd()
}

// Token reads the next token; errors name path, as JSONToken's do.
func (s *Scanner) Token(path string) (Token, error) {
	for {
		c, ok := s.peek()
		if !ok {
			return Token{}, eofErr(s.pos, path)
		}
		switch c {
		case '[', '{':
			if !s.valueAllowed() {
				return Token{}, s.tokenError(c, path)
			}
			s.pos++
			if c == '[' {
				s.push(tokArrayStart)
			} else {
				s.push(tokObjectStart)
			}
			return Token{Kind: TokDelim, Delim: c}, nil
		case ']':
			if s.state != tokArrayStart && s.state != tokArrayComma {
				return Token{}, s.tokenError(c, path)
			}
			s.pos++
			s.pop()
			return Token{Kind: TokDelim, Delim: c}, nil
		case '}':
			if s.state != tokObjectStart && s.state != tokObjectComma {
				return Token{}, s.tokenError(c, path)
			}
			s.pos++
			s.pop()
			return Token{Kind: TokDelim, Delim: c}, nil
		case ':':
			if s.state != tokObjectColon {
				return Token{}, s.tokenError(c, path)
			}
			s.pos++
			s.state = tokObjectValue
			continue
		case ',':
			switch s.state {
			case tokArrayComma:
				s.pos++
				s.state = tokArrayValue
				continue
			case tokObjectComma:
				s.pos++
				s.state = tokObjectKey
				continue
			}
			return Token{}, s.tokenError(c, path)
		case '"':
			if s.state == tokObjectStart || s.state == tokObjectKey {
				text, err := s.scanString(path)
				if err != nil {
					return Token{}, err
				}
				s.state = tokObjectColon
				return Token{Kind: TokString, Text: text}, nil
			}
		}
		if !s.valueAllowed() {
			return Token{}, s.tokenError(c, path)
		}
		var tok Token
		var err error
		switch {
		case c == '"':
			tok.Kind = TokString
			tok.Text, err = s.scanString(path)
		case c == '-' || c >= '0' && c <= '9':
			tok.Kind = TokNumber
			tok.Text, err = s.scanNumber(path)
		case c == 't':
			tok.Kind, tok.Bool = TokBool, true
			err = s.scanLiteral("true", path)
		case c == 'f':
			tok.Kind = TokBool
			err = s.scanLiteral("false", path)
		case c == 'n':
			tok.Kind = TokNull
			err = s.scanLiteral("null", path)
		default:
			return Token{}, valueErr(s.pos, c, "looking for beginning of value", path)
		}
		if err != nil {
			return Token{}, err
		}
		s.valueEnd()
		return tok, nil
	}
}

// scanString reads the string starting at pos (a '"') and returns its
// text; pos moves past the closing quote only on success.
func (s *Scanner) scanString(path string) (string, error) {
	start := s.pos
	plain := true // no escape and valid UTF-8: the text is a substring
	i := start + 1
	for i < len(s.src) {
		c := s.src[i]
		switch {
		case c == '"':
			s.pos = i + 1
			if plain {
				return s.src[start+1 : i], nil
			}
			return unquote(s.src[start : i+1]), nil
		case c == '\\':
			plain = false
			i++
			if i >= len(s.src) {
				return "", unexpectedEOF(start, path)
			}
			switch c = s.src[i]; c {
			case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
				i++
			case 'u':
				i++
				for k := 0; k < 4; k++ {
					if i >= len(s.src) {
						return "", unexpectedEOF(start, path)
					}
					if !isHex(s.src[i]) {
						return "", valueErr(start, s.src[i], `in \u hexadecimal character escape`, path)
					}
					i++
				}
			default:
				return "", valueErr(start, c, "in string escape code", path)
			}
		case c < 0x20:
			return "", valueErr(start, c, "in string literal", path)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRuneInString(s.src[i:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			i += size
		}
	}
	return "", unexpectedEOF(start, path)
}

// unquote decodes a quoted JSON string with encoding/json itself, so that
// escapes, surrogates and invalid UTF-8 turn into exactly the same text.
func unquote(q string) string {
	var x string
	_ = json.Unmarshal([]byte(q), &x) // scanned already: cannot fail
	return x
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// scanNumber reads the number literal at pos with the grammar and
// messages of encoding/json's scanner.
func (s *Scanner) scanNumber(path string) (string, error) {
	start, i, n := s.pos, s.pos, len(s.src)
	if s.src[i] == '-' {
		i++
		if i >= n {
			return "", unexpectedEOF(start, path)
		}
		if !isDigit(s.src[i]) {
			return "", valueErr(start, s.src[i], "in numeric literal", path)
		}
	}
	if s.src[i] == '0' {
		i++
	} else {
		for i < n && isDigit(s.src[i]) {
			i++
		}
	}
	if i < n && s.src[i] == '.' {
		i++
		if i >= n {
			return "", unexpectedEOF(start, path)
		}
		if !isDigit(s.src[i]) {
			return "", valueErr(start, s.src[i], "after decimal point in numeric literal", path)
		}
		for i < n && isDigit(s.src[i]) {
			i++
		}
	}
	if i < n && (s.src[i] == 'e' || s.src[i] == 'E') {
		i++
		if i < n && (s.src[i] == '+' || s.src[i] == '-') {
			i++
		}
		if i >= n {
			return "", unexpectedEOF(start, path)
		}
		if !isDigit(s.src[i]) {
			return "", valueErr(start, s.src[i], "in exponent of numeric literal", path)
		}
		for i < n && isDigit(s.src[i]) {
			i++
		}
	}
	s.pos = i
	return s.src[start:i], nil
}

// scanLiteral reads true, false or null at pos.
func (s *Scanner) scanLiteral(word, path string) error {
	start := s.pos
	for k := 1; k < len(word); k++ {
		i := start + k
		if i >= len(s.src) {
			return unexpectedEOF(start, path)
		}
		if s.src[i] != word[k] {
			return valueErr(start, s.src[i], "in literal "+word+" (expecting "+quoteChar(word[k])+")", path)
		}
	}
	s.pos = start + len(word)
	return nil
}

func (s *Scanner) tokenError(c byte, path string) error {
	var context string
	switch s.state {
	case tokTopValue, tokArrayStart, tokArrayValue, tokObjectValue:
		context = " looking for beginning of value"
	case tokArrayComma:
		context = " after array element"
	case tokObjectKey:
		context = " looking for beginning of object key string"
	case tokObjectColon:
		context = " after object key"
	case tokObjectComma:
		context = " after object key:value pair"
	}
	return posErr(int64(s.pos), "invalid character "+quoteChar(c)+context, path)
}

func valueErr(off int, c byte, context, path string) *errs.Error {
	return posErr(int64(off), "invalid character "+quoteChar(c)+" "+context, path)
}

func eofErr(off int, path string) error { return unexpectedEOF(off, path) }

func unexpectedEOF(off int, path string) error {
	return posErr(int64(off), "unexpected end of input", path)
}

// posErr builds the error syntaxErr builds for the same position and
// message of encoding/json.
func posErr(off int64, msg, path string) *errs.Error {
	p := &jsonPos{off: off, msg: msg}
	if strings.Contains(msg, " in literal ") {
		p.literal, p.msg = true, literalMsg
	}
	e := errs.New(errs.InvalidArgument, "malformed JSON at byte %d: %s", p.off, p.msg)
	e.Field, e.Err = path, p
	return e
}

// quoteChar formats c as encoding/json's scanner does in its messages.
func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}

// Path names an instance in errors: Prefix, or Prefix[Index] when Index >=
// 0 ("instances[3]"). It is formatted only when an error needs it.
type Path struct {
	Prefix string
	Index  int
}

func (p Path) String() string {
	if p.Index < 0 {
		return p.Prefix
	}
	return p.Prefix + "[" + strconv.Itoa(p.Index) + "]"
}

// ReadInstance reads one instance object as schema.ReadInstance reads it
// from a json.Decoder: same members, same values, same errors.
func (s *Scanner) ReadInstance(at Path) (Instance, error) {
	tok, err := s.Token(lazyPath)
	if err != nil {
		return nil, s.fix(err, at)
	}
	if tok.Kind != TokDelim || tok.Delim != '{' {
		return nil, errs.Field(errs.InvalidArgument, at.String(), "expected an object")
	}
	s.cur = s.cur[:0]
	s.inOrder = true
	start := s.pos - 1 // the '{'
	for s.More() {
		tok, err := s.Token(lazyPath)
		if err != nil {
			return nil, s.fix(err, at)
		}
		if tok.Kind != TokString {
			return nil, errs.Field(errs.InvalidArgument, at.String(), "malformed JSON: expected an object key")
		}
		key := tok.Text
		if s.dup(key) {
			return nil, errs.Field(errs.InvalidArgument, at.String()+"."+key, "duplicate key")
		}
		tok, err = s.Token(lazyPath)
		if err != nil {
			return nil, s.fixKey(err, at, key)
		}
		var v Value
		switch tok.Kind {
		case TokNull:
			v.Kind = Null
		case TokBool:
			v = Value{Kind: Bool, Bool: tok.Bool}
		case TokString:
			v = Value{Kind: String, Text: tok.Text}
		case TokNumber:
			v = Value{Kind: Number, Text: tok.Text}
		case TokDelim:
			if tok.Delim != '[' {
				return nil, errs.Field(errs.InvalidArgument, at.String()+"."+key, "nested objects are not allowed; instance values are numbers, strings, booleans, null or arrays of numbers")
			}
			if v, err = s.readNumberArray(at, key); err != nil {
				return nil, err
			}
		}
		s.cur = append(s.cur, Member{Name: key, Value: v})
	}
	if _, err := s.Token(lazyPath); err != nil { // '}'
		return nil, s.fix(err, at)
	}
	if len(s.cur) == 0 {
		return nil, nil
	}
	if cap(s.slab)-len(s.slab) < len(s.cur) {
		s.slab = make([]Member, 0, s.slabSize(start))
	}
	n := len(s.slab)
	s.slab = append(s.slab, s.cur...)
	s.last = Instance(s.slab[n:len(s.slab):len(s.slab)])
	return s.last, nil
}

// slabSize is the capacity of the next member slab: the members of the
// rest of the body, guessed from the size of the instance just read
// (bodies hold instances alike), but at most slabChunk more than it
// needs now, so that a small instance before a huge string cannot make
// the guess cost more than the body. Slabs do not double: a 1,000-row,
// 30-field body takes eight slabs of 4,096 members, not slabs summing to
// twice its members (the doubling allocated and zeroed 4.4 MB for its
// 2.2 MB of members).
func (s *Scanner) slabSize(start int) int {
	used := max(s.pos-start, 1)
	left := len(s.src) - s.pos
	return len(s.cur) + min(len(s.cur)*(left/used), left/8, slabChunk)
}

const slabChunk = 4096

// dup reports whether key is already a member of the instance being read.
// Instances of one body usually list the same names in the same order:
// while the names read so far are the last instance's, in its order, a key
// equal to its next name is new (the last instance's names are distinct),
// which spares comparing every key with every earlier one (11 % of a
// 1,000-row, 30-field request's CPU).
func (s *Scanner) dup(key string) bool {
	if j := len(s.cur); s.inOrder && j < len(s.last) && s.last[j].Name == key {
		return false
	}
	s.inOrder = false
	for i := range s.cur {
		if s.cur[i].Name == key {
			return true
		}
	}
	return false
}

func (s *Scanner) readNumberArray(at Path, key string) (Value, error) {
	s.items = s.items[:0]
	for i := 0; ; i++ {
		ep := func() string { return at.String() + "." + key + "[" + strconv.Itoa(i) + "]" }
		tok, err := s.Token(lazyPath)
		if err != nil {
			e := err.(*errs.Error)
			e.Field = ep()
			return Value{}, e
		}
		switch tok.Kind {
		case TokNumber:
			s.items = append(s.items, tok.Text)
			continue
		case TokDelim:
			if tok.Delim == ']' {
				if cap(s.itemSlab)-len(s.itemSlab) < len(s.items) || len(s.items) == 0 && s.itemSlab == nil {
					s.itemSlab = make([]string, 0, max(len(s.items), 2*cap(s.itemSlab), 16))
				}
				n := len(s.itemSlab)
				s.itemSlab = append(s.itemSlab, s.items...)
				return Value{Kind: Array, Items: s.itemSlab[n:len(s.itemSlab):len(s.itemSlab)]}, nil
			}
			return Value{}, errs.Field(errs.InvalidArgument, ep(), "nested arrays and objects are not allowed; arrays hold numbers only")
		case TokNull:
			return Value{}, errs.Field(errs.InvalidArgument, ep(), "expected a number, got null (arrays hold numbers only)")
		case TokBool:
			return Value{}, errs.Field(errs.InvalidArgument, ep(), "expected a number, got a boolean (arrays hold numbers only)")
		case TokString:
			return Value{}, errs.Field(errs.InvalidArgument, ep(), "expected a number, got a string (arrays hold numbers only)")
		}
	}
}

// lazyPath marks a syntax error whose field the caller fills in, so that
// no path string is built unless there is an error.
const lazyPath = "\x00"

// fix sets the field of a syntax error read at an instance's own level.
func (s *Scanner) fix(err error, at Path) error {
	e := err.(*errs.Error)
	e.Field = at.String()
	return e
}

func (s *Scanner) fixKey(err error, at Path, key string) error {
	e := err.(*errs.Error)
	e.Field = at.String() + "." + key
	return e
}
