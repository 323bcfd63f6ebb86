//! `POST /v3/.../messages/upload` with `application/pdf`: the PDF's text, page by page, becomes
//! messages; a PDF that cannot be read is 422 and writes nothing.

use serde_json::{Value, json};

use crate::harness::{AppServer, TestApp};

async fn serve() -> AppServer {
    AppServer::with_body_limit(TestApp::new().await, 16 << 20).await
}

/// POSTs `body` as JSON; the status and the JSON answer.
async fn post(api: &AppServer, path: &str, body: Value) -> (u16, Value) {
    let resp = api
        .client
        .post(format!("{}{path}", api.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// A PDF (1.4, a classic cross-reference table) with one page per string, each drawn in
/// Helvetica on one line.
fn pdf(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
            .to_owned(),
    ];
    for (i, text) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
             /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
            5 + 2 * i
        ));
        let escaped = text
            .replace('\\', "\\\\")
            .replace('(', "\\(")
            .replace(')', "\\)");
        let content = format!("BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET");
        objects.push(format!(
            "<< /Length {} >>\nstream\n{content}\nendstream",
            content.len()
        ));
    }
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

/// The upload of `file` as `kind` by alice, with metadata; the status and the body.
async fn upload(api: &AppServer, kind: &str, file: &[u8]) -> (u16, Value) {
    let b = "PdfBoundary93x";
    let mut body = format!(
        "--{b}\r\nContent-Disposition: form-data; name=\"peer_id\"\r\n\r\nalice\r\n\
         --{b}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{{\"src\": \"report\"}}\r\n\
         --{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"report.pdf\"\r\n\
         Content-Type: {kind}\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{b}--\r\n").as_bytes());
    let resp = api
        .client
        .post(format!(
            "{}/v3/workspaces/w/sessions/s/messages/upload",
            api.base
        ))
        .header("content-type", format!("multipart/form-data; boundary={b}"))
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn messages_in_session(api: &AppServer) -> Vec<Value> {
    let (status, page) = post(
        api,
        "/v3/workspaces/w/sessions/s/messages/list?size=100",
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_pdf_upload_becomes_messages_holding_its_text() {
    let api = serve().await;
    let (status, made) = upload(
        &api,
        "application/pdf",
        &pdf(&["Ferns grow best in the shade of old oaks"]),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let made = made.as_array().unwrap();
    assert_eq!(made.len(), 1);
    assert_eq!(
        made[0]["content"],
        "[Page 1]\nFerns grow best in the shade of old oaks"
    );
    assert_eq!(made[0]["peer_id"], "alice");
    assert_eq!(made[0]["metadata"], json!({"src": "report"}));
    assert_eq!(messages_in_session(&api).await.len(), 1);
}

#[tokio::test]
async fn a_pdf_upload_of_many_pages_keeps_their_order_across_messages() {
    let api = serve().await;
    // Three pages of 12,000 characters: 36,000 and the page marks, so two messages of at most
    // 25,000, the pages in order across them.
    let pages: Vec<String> = ["alpha", "bravo", "charlie"]
        .iter()
        .map(|word| format!("{word} ").repeat(12_000 / (word.len() + 1)))
        .collect();
    let refs: Vec<&str> = pages.iter().map(String::as_str).collect();
    let (status, made) = upload(&api, "application/pdf", &pdf(&refs)).await;
    assert_eq!(status, 201, "{made:.300}");
    let made = made.as_array().unwrap();
    assert_eq!(made.len(), 2);
    let contents: Vec<&str> = made
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents[0].chars().count(), 25_000);
    let whole = contents.concat();
    let at = |needle: &str| {
        whole
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing"))
    };
    assert!(at("[Page 1]\nalpha") < at("[Page 2]\nbravo"));
    assert!(at("[Page 2]\nbravo") < at("[Page 3]\ncharlie"));
    assert!(!whole[at("[Page 1]")..at("[Page 2]")].contains("bravo"));
    let listed: Vec<Value> = messages_in_session(&api).await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["content"], made[0]["content"]);
}

#[tokio::test]
async fn a_broken_pdf_upload_is_refused_and_writes_nothing() {
    let api = serve().await;
    post(&api, "/v3/workspaces/w/sessions", json!({"id": "s"})).await;
    let (status, body) = upload(&api, "application/pdf", b"%PDF-1.4 garbage").await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("not a PDF that can be read"),
        "{body}"
    );
    // A well-formed PDF whose page draws no text.
    let blank = pdf(&[""]);
    let (status, body) = upload(&api, "application/pdf", &blank).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("no text"),
        "{body}"
    );
    assert!(messages_in_session(&api).await.is_empty());
}

#[tokio::test]
async fn a_pdf_uploads_text_is_found_by_search() {
    let api = serve().await;
    let (status, made) = upload(
        &api,
        "application/pdf",
        &pdf(&[
            "The quarterly harvest of saffron doubled",
            "Otters hold paws while sleeping",
        ]),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    let (status, found) = post(
        &api,
        "/v3/workspaces/w/sessions/s/search",
        json!({"query": "otters sleeping"}),
    )
    .await;
    assert_eq!(status, 200, "{found}");
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]["content"]
            .as_str()
            .unwrap()
            .contains("[Page 2]\nOtters hold paws while sleeping"),
        "{found:?}"
    );
}
