//! The README's table of supported APIs must match the supported-API table
//! that ApiVersions is derived from (`weir_protocol_compat::api_table`).

use weir_protocol_compat::api_table::SUPPORTED_APIS;

#[test]
fn readme_lists_exactly_the_supported_apis() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let section = readme
        .split("<!-- supported-apis:start -->")
        .nth(1)
        .and_then(|s| s.split("<!-- supported-apis:end -->").next())
        .expect("README.md has the supported-apis markers");
    let mut listed: Vec<(i16, i16, i16, i16)> = Vec::new();
    for line in section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| API") && !l.starts_with("|--"))
    {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let key: i16 = cells[1]
            .parse()
            .unwrap_or_else(|_| panic!("bad key in {line}"));
        let (min, max) = cells[2]
            .split_once('-')
            .unwrap_or_else(|| panic!("bad range in {line}"));
        let (served_min, _) = cells[3]
            .split_once('-')
            .unwrap_or_else(|| panic!("bad range in {line}"));
        listed.push((
            key,
            min.parse().unwrap(),
            max.parse().unwrap(),
            served_min.parse().unwrap(),
        ));
    }
    let table: Vec<(i16, i16, i16, i16)> = SUPPORTED_APIS
        .iter()
        .map(|a| {
            (
                a.api_key as i16,
                a.min_version,
                a.max_version,
                a.min_served_version,
            )
        })
        .collect();
    assert_eq!(listed, table, "README supported-API table is out of date");
}
