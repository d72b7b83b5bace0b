"""A LUBM-profile data generator, written as N-Triples.

No LUBM generator (UBA) is on our registries, so this one follows the
profile of Guo, Pan and Heflin's UBA 1.7: per university 15-25
departments; per department 7-10 full, 10-14 associate and 8-11 assistant
professors, 5-7 lecturers, 8-14 undergraduates and 3-4 graduate students
per faculty member, 10-20 research groups, a course or two per faculty
member at each level; publications per author as in UBA; undergraduate,
master's and doctoral degreeFrom links to universities; one full professor
heads each department. Terms use UBA's IRIs (http://www.Department0.
University0.edu/FullProfessor0, the univ-bench ontology's ub: names), so
the LUBM queries run as written. It adds one thing UBA lacks: a foaf:knows
social graph among the people of each university (2-5 links out per
person, within the university), for the knows+ path queries. With
--values it also writes typed values for the FILTER queries (kind
"filter" in queries.py): per person ub:age (xsd:integer, one in fifty
written non-canonically, "042"), ub:fullTime (xsd:boolean) and ub:hired
(xsd:date); per course ub:credits; per publication ub:publicationDate.
They come from a random stream of their own, so the other triples are
the same with or without them.

Deterministic: university u is drawn from random.Random(seed * 1_000_003
+ u) alone, so a file depends only on (scale, seed) and universities can be
written in any order. Only rdf:type facts the data states are written (no
inference): a GraduateStudent is not also typed Student.

    python benchmarks/rdf/lubm.py --scale 10 --out lubm10.nt
"""

from __future__ import annotations

import argparse
import os
import random
import sys

UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
FOAF_KNOWS = "<http://xmlns.com/foaf/0.1/knows>"

# (class, count range, publications range) per faculty rank, as UBA.
FACULTY = (
    ("FullProfessor", (7, 10), (15, 20)),
    ("AssociateProfessor", (10, 14), (10, 18)),
    ("AssistantProfessor", (8, 11), (5, 10)),
    ("Lecturer", (5, 7), (0, 5)),
)


def ub(name: str) -> str:
    return f"<{UB}{name}>"


def univ_iri(u: int) -> str:
    return f"<http://www.University{u}.edu>"


def lit(value: str) -> str:
    return '"' + value + '"'


def typed(value: str, xsd_type: str) -> str:
    return f'"{value}"^^<http://www.w3.org/2001/XMLSchema#{xsd_type}>'


class University:
    """Writes one university's triples to a list of lines."""

    def __init__(self, u: int, scale: int, seed: int, values: bool = False):
        self.u = u
        self.scale = scale
        self.rng = random.Random(seed * 1_000_003 + u)
        self.vrng = random.Random(seed * 1_000_003 + u + (1 << 40)) if values else None
        self.out: list[str] = []
        self.people: list[str] = []

    def t(self, s: str, p: str, o: str) -> None:
        self.out.append(f"{s} {p} {o} .\n")

    def other_univ(self) -> str:
        # UBA draws degree universities from a pool larger than the data;
        # three in four here are generated ones, so Q2's triangle matches.
        r = self.rng
        if r.random() < 0.75:
            return univ_iri(r.randrange(self.scale))
        return univ_iri(r.randrange(self.scale, self.scale + 1000))

    def person(self, iri: str, name: str, dept_host: str) -> None:
        self.t(iri, ub("name"), lit(name))
        self.t(iri, ub("emailAddress"), lit(f"{name}@{dept_host}"))
        self.t(iri, ub("telephone"), lit(f"xxx-xxx-{self.rng.randrange(10000):04d}"))
        self.people.append(iri)
        if v := self.vrng:
            age = v.randint(18, 70)
            self.t(iri, ub("age"), typed(f"0{age}" if v.random() < 0.02 else str(age), "integer"))
            self.t(iri, ub("fullTime"), typed("true" if v.random() < 0.7 else "false", "boolean"))
            self.t(iri, ub("hired"), typed(f"{v.randint(1980, 2024)}-{v.randint(1, 12):02d}-{v.randint(1, 28):02d}", "date"))

    def value(self, s: str, p: str, lo: int, hi: int, kind: str) -> None:
        """A typed value for `s` (with --values): an integer or a date in a year lo..hi."""
        if v := self.vrng:
            x = str(v.randint(lo, hi)) if kind == "integer" else f"{v.randint(lo, hi)}-{v.randint(1, 12):02d}-{v.randint(1, 28):02d}"
            self.t(s, ub(p), typed(x, kind))

    def generate(self) -> list[str]:
        r = self.rng
        uni = univ_iri(self.u)
        self.t(uni, RDF_TYPE, ub("University"))
        self.t(uni, ub("name"), lit(f"University{self.u}"))
        for d in range(r.randint(15, 25)):
            self.department(d)
        self.social()
        return self.out

    def department(self, d: int) -> None:
        r = self.rng
        host = f"Department{d}.University{self.u}.edu"
        base = f"http://www.{host}"
        dept = f"<{base}>"
        self.t(dept, RDF_TYPE, ub("Department"))
        self.t(dept, ub("name"), lit(f"Department{d}"))
        self.t(dept, ub("subOrganizationOf"), univ_iri(self.u))

        faculty: list[str] = []
        professors: list[str] = []
        courses: list[str] = []
        grad_courses: list[str] = []
        pubs_of: list[tuple[str, str, int]] = []
        for cls, (lo, hi), (plo, phi) in FACULTY:
            for i in range(r.randint(lo, hi)):
                iri = f"<{base}/{cls}{i}>"
                self.t(iri, RDF_TYPE, ub(cls))
                self.person(iri, f"{cls}{i}", host)
                self.t(iri, ub("worksFor"), dept)
                if cls != "Lecturer":
                    self.t(iri, ub("researchInterest"), lit(f"Research{r.randrange(30)}"))
                    professors.append(iri)
                self.t(iri, ub("undergraduateDegreeFrom"), self.other_univ())
                self.t(iri, ub("mastersDegreeFrom"), self.other_univ())
                self.t(iri, ub("doctoralDegreeFrom"), self.other_univ())
                for _ in range(r.randint(1, 2)):
                    c = f"<{base}/Course{len(courses)}>"
                    courses.append(c)
                    self.t(c, RDF_TYPE, ub("Course"))
                    self.t(c, ub("name"), lit(f"Course{len(courses) - 1}"))
                    self.value(c, "credits", 1, 10, "integer")
                    self.t(iri, ub("teacherOf"), c)
                if cls != "Lecturer":
                    for _ in range(r.randint(1, 2)):
                        c = f"<{base}/GraduateCourse{len(grad_courses)}>"
                        grad_courses.append(c)
                        self.t(c, RDF_TYPE, ub("GraduateCourse"))
                        self.t(c, ub("name"), lit(f"GraduateCourse{len(grad_courses) - 1}"))
                        self.t(iri, ub("teacherOf"), c)
                faculty.append(iri)
                pubs_of.append((iri, cls, r.randint(plo, phi)))
        # The head is a full professor (UBA: FullProfessor0... any of them).
        self.t(f"<{base}/FullProfessor{r.randrange(7)}>", ub("headOf"), dept)

        pubs: list[str] = []
        for iri, cls, n in pubs_of:
            for k in range(n):
                p = f"<{base}/{iri.rsplit('/', 1)[1][:-1]}/Publication{k}>"
                self.t(p, RDF_TYPE, ub("Publication"))
                self.t(p, ub("name"), lit(f"Publication{k}"))
                self.t(p, ub("publicationAuthor"), iri)
                self.value(p, "publicationDate", 1990, 2024, "date")
                pubs.append(p)

        nfac = len(faculty)
        for i in range(nfac * r.randint(8, 14)):
            s = f"<{base}/UndergraduateStudent{i}>"
            self.t(s, RDF_TYPE, ub("UndergraduateStudent"))
            self.person(s, f"UndergraduateStudent{i}", host)
            self.t(s, ub("memberOf"), dept)
            for c in r.sample(courses, min(len(courses), r.randint(2, 4))):
                self.t(s, ub("takesCourse"), c)
            if r.random() < 0.2:
                self.t(s, ub("advisor"), r.choice(professors))
        for i in range(nfac * r.randint(3, 4)):
            s = f"<{base}/GraduateStudent{i}>"
            self.t(s, RDF_TYPE, ub("GraduateStudent"))
            self.person(s, f"GraduateStudent{i}", host)
            self.t(s, ub("memberOf"), dept)
            self.t(s, ub("undergraduateDegreeFrom"), self.other_univ())
            self.t(s, ub("advisor"), r.choice(professors))
            for c in r.sample(grad_courses, min(len(grad_courses), r.randint(1, 3))):
                self.t(s, ub("takesCourse"), c)
            x = r.random()
            if x < 0.22:
                self.t(s, RDF_TYPE, ub("TeachingAssistant"))
                self.t(s, ub("teachingAssistantOf"), r.choice(courses))
            elif x < 0.5:
                self.t(s, RDF_TYPE, ub("ResearchAssistant"))
            for p in r.sample(pubs, min(len(pubs), r.randint(0, 5))):
                self.t(p, ub("publicationAuthor"), s)

        for g in range(r.randint(10, 20)):
            rg = f"<{base}/ResearchGroup{g}>"
            self.t(rg, RDF_TYPE, ub("ResearchGroup"))
            self.t(rg, ub("subOrganizationOf"), dept)

    def social(self) -> None:
        r = self.rng
        people = self.people
        for p in people:
            for q in r.sample(people, r.randint(2, 5)):
                if q != p:
                    self.t(p, FOAF_KNOWS, q)


def generate(scale: int, seed: int, out, values: bool = False) -> int:
    """Writes universities 0..scale-1 to the text file `out`; returns the triple count."""
    assert 1 <= scale <= 100_000, "scale is the number of universities, 1..100000"
    n = 0
    for u in range(scale):
        lines = University(u, scale, seed, values).generate()
        out.write("".join(lines))
        n += len(lines)
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=1, help="universities (LUBM(N)); default 1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="N-Triples file to write")
    ap.add_argument("--values", action="store_true", help="also typed values (integers, booleans, dates) for the filter queries")
    a = ap.parse_args(argv)
    if not 1 <= a.scale <= 100_000:
        ap.error("--scale is 1..100000")
    tmp = a.out + ".part"
    with open(tmp, "w", encoding="utf-8", buffering=1 << 20) as f:
        n = generate(a.scale, a.seed, f, a.values)
    os.replace(tmp, a.out)
    print(f"{a.out}: {n} triples, {os.path.getsize(a.out)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
