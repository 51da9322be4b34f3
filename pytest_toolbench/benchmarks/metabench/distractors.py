"""Generates the bundled distractor tool library (``data/metabench/library/distractor_tools.json``).

Why: the paper retrieves from a 1,000-tool pool per dialogue drawn from Meta-Bench's 7,361 tools
(spec §1). The bundled sample has far fewer tools, so pools are filled from this deterministic,
realistic library (resource x operation, ToolACE-like JSON with typed, described parameters).
It is only used when the benchmark's own tools cannot fill a pool; real data does not need it.
Regenerate with ``python -m pytest_toolbench.benchmarks.metabench.distractors OUT.json``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# (name, singular phrase, plural phrase, domain-specific filter parameter, its description)
RESOURCES: list[tuple[str, str, str, str, str]] = [
    ("hotel", "hotel", "hotels", "city", "The city where the hotel is located, e.g. Paris"),
    ("flight", "flight", "flights", "origin_airport", "IATA code of the departure airport, e.g. JFK"),
    ("restaurant", "restaurant", "restaurants", "cuisine", "Type of cuisine, e.g. Italian"),
    ("movie", "movie", "movies", "genre", "Film genre such as comedy or thriller"),
    ("book", "book", "books", "author", "Full name of the author"),
    ("song", "song", "songs", "artist", "Name of the performing artist"),
    ("podcast", "podcast episode", "podcast episodes", "show_name", "Title of the podcast show"),
    ("recipe", "recipe", "recipes", "ingredient", "Main ingredient to cook with"),
    ("stock", "stock quote", "stock quotes", "ticker", "Stock ticker symbol, e.g. AAPL"),
    ("crypto_asset", "cryptocurrency asset", "cryptocurrency assets", "symbol", "Coin symbol such as BTC"),
    ("invoice", "invoice", "invoices", "customer_id", "Identifier of the billed customer"),
    ("order", "e-commerce order", "e-commerce orders", "customer_email", "Email address of the buyer"),
    ("product", "store product", "store products", "category", "Product category, e.g. electronics"),
    ("employee", "employee record", "employee records", "department", "Department name, e.g. Sales"),
    ("patient", "patient record", "patient records", "clinic_id", "Identifier of the clinic"),
    ("appointment", "medical appointment", "medical appointments", "doctor_name", "Name of the doctor"),
    ("prescription", "prescription", "prescriptions", "medication", "Name of the medication"),
    ("vehicle", "vehicle listing", "vehicle listings", "make", "Manufacturer of the vehicle, e.g. Toyota"),
    ("parking_spot", "parking spot", "parking spots", "zone", "Parking zone code"),
    ("bike_station", "bike-sharing station", "bike-sharing stations", "district", "City district name"),
    ("train", "train connection", "train connections", "departure_station", "Name of the departure station"),
    ("bus_route", "bus route", "bus routes", "route_number", "Public bus route number"),
    ("museum", "museum exhibition", "museum exhibitions", "museum_name", "Name of the museum"),
    ("concert", "concert", "concerts", "venue", "Name of the concert venue"),
    ("sports_match", "sports match", "sports matches", "league", "Name of the league, e.g. Premier League"),
    ("athlete", "athlete profile", "athlete profiles", "sport", "Name of the sport"),
    ("team", "sports team", "sports teams", "country", "Country the team plays for"),
    ("course", "online course", "online courses", "subject", "Subject area, e.g. mathematics"),
    ("student", "student record", "student records", "school_id", "Identifier of the school"),
    ("exam", "exam result", "exam results", "student_id", "Identifier of the student"),
    ("job_posting", "job posting", "job postings", "job_title", "Title of the position"),
    ("property", "real-estate listing", "real-estate listings", "neighborhood", "Neighborhood name"),
    ("rental", "holiday rental", "holiday rentals", "destination", "Holiday destination"),
    ("pet", "adoptable pet", "adoptable pets", "species", "Animal species, e.g. dog"),
    ("plant", "plant care guide", "plant care guides", "plant_species", "Botanical name of the plant"),
    ("recipe_review", "recipe review", "recipe reviews", "recipe_id", "Identifier of the recipe"),
    ("news_article", "news article", "news articles", "topic", "News topic such as politics"),
    ("blog_post", "blog post", "blog posts", "tag", "Tag attached to the post"),
    ("support_ticket", "customer support ticket", "customer support tickets", "priority", "Ticket priority: low, medium or high"),
    ("shipment", "parcel shipment", "parcel shipments", "carrier", "Shipping carrier, e.g. DHL"),
    ("warehouse_item", "warehouse inventory item", "warehouse inventory items", "warehouse_id", "Identifier of the warehouse"),
    ("supplier", "supplier", "suppliers", "region", "Sales region"),
    ("contract", "legal contract", "legal contracts", "party_name", "Name of a contracting party"),
    ("insurance_policy", "insurance policy", "insurance policies", "policy_type", "Type of policy, e.g. home"),
    ("loan", "loan application", "loan applications", "applicant_id", "Identifier of the applicant"),
    ("bank_account", "bank account", "bank accounts", "account_holder", "Name of the account holder"),
    ("transaction", "card transaction", "card transactions", "merchant", "Merchant name"),
    ("tax_return", "tax return", "tax returns", "tax_year", "Fiscal year of the return"),
    ("energy_meter", "smart energy meter reading", "smart energy meter readings", "meter_id", "Identifier of the meter"),
    ("thermostat", "smart thermostat", "smart thermostats", "room", "Room where the device is installed"),
    ("security_camera", "security camera clip", "security camera clips", "camera_id", "Identifier of the camera"),
    ("satellite_image", "satellite image", "satellite images", "region_name", "Geographic region"),
    ("earthquake", "earthquake report", "earthquake reports", "min_magnitude", "Minimum magnitude on the Richter scale"),
    ("air_quality", "air quality measurement", "air quality measurements", "station_id", "Monitoring station identifier"),
    ("pollen", "pollen forecast", "pollen forecasts", "postal_code", "Postal code of the area"),
    ("tide", "tide table", "tide tables", "harbor", "Name of the harbor"),
    ("ski_resort", "ski resort", "ski resorts", "mountain_range", "Mountain range, e.g. Alps"),
    ("hiking_trail", "hiking trail", "hiking trails", "park_name", "National park name"),
    ("campsite", "campsite", "campsites", "state", "State or province"),
    ("wine", "wine", "wines", "grape_variety", "Grape variety, e.g. Merlot"),
    ("game", "video game", "video games", "platform", "Gaming platform, e.g. PC"),
    ("tv_show", "TV show", "TV shows", "network", "Broadcasting network"),
    ("charity", "charity organization", "charity organizations", "cause", "Cause the charity supports"),
]

# (name template, description template, extra parameters) -- {r}: resource name, {s}/{p}: phrases.
OPERATIONS: list[tuple[str, str, list[tuple[str, str, str, bool]]]] = [
    ("get_{r}_details", "Retrieve detailed information about a {s} by its identifier.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True)]),
    ("search_{r}s", "Search {p} that match a free-text query and optional filters.",
     [("query", "string", "Free-text search terms.", True), ("{f}", "string", "{fd}", False),
      ("limit", "integer", "Maximum number of results to return.", False)]),
    ("list_{r}s_by_{f}", "List {p} filtered by {fh}.",
     [("{f}", "string", "{fd}", True), ("page", "integer", "Page number of the result list.", False)]),
    ("create_{r}", "Create a new {s} with the given attributes.",
     [("name", "string", "Display name of the new {s}.", True),
      ("{f}", "string", "{fd}", True), ("notes", "string", "Optional free-text notes.", False)]),
    ("update_{r}", "Update one or more fields of an existing {s}.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("fields", "object", "Mapping of field names to their new values.", True)]),
    ("delete_{r}", "Permanently delete a {s}.",
     [("{r}_id", "string", "The unique identifier of the {s} to delete.", True),
      ("confirm", "boolean", "Must be true to confirm the deletion.", True)]),
    ("count_{r}s", "Count the {p} that match a filter, for reporting dashboards.",
     [("{f}", "string", "{fd}", True)]),
    ("export_{r}s_csv", "Export {p} as a CSV file and return a download link.",
     [("{f}", "string", "{fd}", False), ("columns", "array", "Columns to include in the export.", False)]),
    ("get_{r}_history", "Get the change history of a {s} between two dates.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("start_date", "string", "Start date in YYYY-MM-DD format.", True),
      ("end_date", "string", "End date in YYYY-MM-DD format.", True)]),
    ("rate_{r}", "Submit a rating from 1 to 5 for a {s}.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("rating", "integer", "Rating between 1 and 5.", True), ("comment", "string", "Optional review text.", False)]),
    ("get_{r}_statistics", "Compute summary statistics (count, average, trend) over {p}.",
     [("{f}", "string", "{fd}", True), ("period", "string", "Aggregation period: day, week or month.", True)]),
    ("subscribe_{r}_alerts", "Subscribe to notifications when new {p} appear.",
     [("{f}", "string", "{fd}", True), ("email", "string", "Email address that receives the alerts.", True)]),
    ("compare_{r}s", "Compare two {p} side by side.",
     [("first_id", "string", "Identifier of the first {s}.", True),
      ("second_id", "string", "Identifier of the second {s}.", True)]),
    ("recommend_{r}s", "Recommend {p} tailored to a user's preferences.",
     [("user_id", "string", "Identifier of the user to recommend for.", True),
      ("{f}", "string", "{fd}", False), ("count", "integer", "How many recommendations to return.", False)]),
    ("translate_{r}_description", "Translate the description of a {s} into another language.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("target_language", "string", "ISO 639-1 code of the target language, e.g. de.", True)]),
    ("share_{r}", "Share a {s} with another user by email.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("recipient_email", "string", "Email address of the recipient.", True)]),
    ("validate_{r}", "Check a {s} for missing or inconsistent data.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True)]),
]


def _fmt(text: str, r: str, s: str, p: str, f: str, fd: str) -> str:
    return text.format(r=r, s=s, p=p, f=f, fd=fd, fh=f.replace("_", " "))


def generate() -> list[dict[str, Any]]:
    """The library, in a fixed order: every resource x every operation (1,071 tools)."""
    tools: list[dict[str, Any]] = []
    for r, s, p, f, fd in RESOURCES:
        for name_t, desc_t, params_t in OPERATIONS:
            properties: dict[str, Any] = {}
            required: list[str] = []
            for pname_t, ptype, pdesc_t, req in params_t:
                pname = _fmt(pname_t, r, s, p, f, fd)
                if pname in properties:
                    continue
                properties[pname] = {"type": ptype, "description": _fmt(pdesc_t, r, s, p, f, fd)}
                if req:
                    required.append(pname)
            tools.append({
                "name": _fmt(name_t, r, s, p, f, fd),
                "description": _fmt(desc_t, r, s, p, f, fd),
                "parameters": {"type": "object", "properties": properties, "required": required},
            })
    return tools


def dumps(tools: list[dict[str, Any]]) -> str:
    """One tool per line: small, and diffs show which tool changed."""
    return "[\n" + ",\n".join(json.dumps(t, ensure_ascii=False) for t in tools) + "\n]\n"


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    with open(sys.argv[1], "w", encoding="utf-8") as fh:
        fh.write(dumps(generate()))
