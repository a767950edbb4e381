package translate

// Media in a Gemini request's parts: inlineData (images and PDFs, as data
// URLs) and fileData (images at http(s) URLs), and what a function
// response's content becomes.

import "strings"

// a string, "Error: " + response.error likewise, else the response as JSON
// text.
func appendResponseContent(dst []byte, resp string, media bool) []byte {
	if isNull(resp) || trimJSON(resp) == "{}" {
		if media {
			return append(dst, `"(see the attached media)"`...)
		}
		return append(dst, `""`...)
	}
	it, _ := objIter(resp)
	k, v, _ := it.next()
	if _, _, more := it.next(); !more && isStr(v) {
		switch k {
		case "output", "content", "result":
			return append(dst, v...)
		case "error":
			dst = append(dst, `"`+errorPrefix...)
			dst = append(dst, inner(v)...)
			return append(dst, '"')
		}
	}
	return appendStr(dst, resp)
}

// mediaPart finds the inlineData or fileData of a functionResponse's part
// (kind gpInline or gpFile, v its value) and checks it.
func mediaPart(part string, p *loc) (kind uint8, v string, err *Error) {
	it, ok := objIter(part)
	if !ok {
		return gpNone, "", p.bad(": must be an object {inlineData} or {fileData}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			return gpNone, "", p.bad(": must hold inlineData or fileData")
		}
		switch geminiKey(k) {
		case "inlineData":
			at := p.member("inlineData")
			_, _, err = readInlineData(val, &at)
			return gpInline, val, err
		case "fileData":
			at := p.member("fileData")
			_, err = readFileData(val, &at)
			return gpFile, val, err
		}
	}
}

// appendMedia writes checked media (mediaPart) as a chat content part.
func appendMedia(dst []byte, kind uint8, v string) []byte {
	var p loc // not spelled: the media were checked
	if kind == gpInline {
		dst, _ = appendInlineData(dst, v, &p)
	} else {
		dst, _ = appendFileData(dst, v, &p)
	}
	return dst
}

// geminiImageTypes are the image types every upstream takes inline.
var geminiImageTypes = [...]string{"image/png", "image/jpeg", "image/gif", "image/webp"}

const mediaTypesMsg = "image/png, image/jpeg, image/gif, image/webp and application/pdf"

func isGeminiImage(mt string) bool {
	for _, t := range geminiImageTypes {
		if mt == t {
			return true
		}
	}
	return false
}

// readInlineData reads and checks inlineData {mimeType, data}: mt is the
// media type, lowercased, and data the literal of the base64 data.
func readInlineData(v string, p *loc) (mt, data string, err *Error) {
	var mime string
	it, ok := objIter(v)
	if !ok {
		return "", "", p.bad(": must be an object {mimeType, data}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mimeType":
			firstOf(&mime, val)
		case "data":
			firstOf(&data, val)
		}
	}
	switch {
	case !isStr(mime):
		return "", "", p.bad(".mimeType: must be a string")
	case !isStr(data):
		return "", "", p.bad(".data: must be a string (base64)")
	}
	mt = strings.ToLower(inner(mime)) // no copy when already lower case
	if !isGeminiImage(mt) && mt != "application/pdf" {
		return "", "", p.bad(".mimeType: " + mt + " is not supported; inline data may be " + mediaTypesMsg)
	}
	return mt, data, nil
}

// appendInlineData writes inlineData as an image_url part (a data URL) or,
// for a PDF, a file part.
func appendInlineData(dst []byte, v string, p *loc) ([]byte, *Error) {
	mt, data, err := readInlineData(v, p)
	if err != nil {
		return dst, err
	}
	dst = sep(dst)
	if mt == "application/pdf" {
		dst = append(dst, `{"type":"file","file":{"filename":"document.pdf","file_data":"data:`...)
	} else {
		dst = append(dst, `{"type":"image_url","image_url":{"url":"data:`...)
	}
	dst = append(dst, mt...)
	dst = append(dst, ";base64,"...)
	dst = append(dst, inner(data)...)
	return append(dst, `"}}`...), nil
}

// readFileData reads and checks fileData {mimeType, fileUri}: only an
// image by http(s) URL is carried; other files, and those of the Files API
// (which need Google's key to read), are refused. uri is a literal.
func readFileData(v string, p *loc) (uri string, err *Error) {
	var mime string
	it, ok := objIter(v)
	if !ok {
		return "", p.bad(": must be an object {mimeType, fileUri}")
	}
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mimeType":
			firstOf(&mime, val)
		case "fileUri":
			firstOf(&uri, val)
		}
	}
	if !isStr(uri) {
		return "", p.bad(".fileUri: must be a string")
	}
	u := inner(uri)
	switch {
	case strings.Contains(u, "generativelanguage.googleapis.com"):
		return "", p.bad(".fileUri: files uploaded to the Gemini Files API cannot be read here; send the data inline (inlineData)")
	case !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://"):
		return "", p.bad(".fileUri: only http(s) URLs of images are supported; send other files inline (inlineData)")
	case !isStr(mime) || !strings.HasPrefix(strings.ToLower(inner(mime)), "image/"):
		return "", p.bad(".mimeType: only images are supported by URL (an image/... mimeType); send other files inline (inlineData) as " + mediaTypesMsg)
	}
	return uri, nil
}

// appendFileData writes fileData as an image_url part.
func appendFileData(dst []byte, v string, p *loc) ([]byte, *Error) {
	uri, err := readFileData(v, p)
	if err != nil {
		return dst, err
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
	dst = append(dst, uri...)
	return append(dst, `}}`...), nil
}
