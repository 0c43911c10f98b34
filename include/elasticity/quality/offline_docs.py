"""Great Expectations Data Docs that open with no network.

GX's pages load Bootstrap, jQuery, bootstrap-table and Font Awesome from public
CDNs; the installed package ships only its own CSS, fonts and images. Offline
the pages open unstyled and the index's validation list (filled by
bootstrap-table) stays empty. This rewrites the built site: remote stylesheets,
scripts and images are dropped or pointed at the package's local copies, and
each page loads `static/offline.css` (the Bootstrap rules the pages use) and
`static/offline.js` (a few lines standing in for the jQuery calls they make:
tables from their data, tabs, collapses).
"""

from __future__ import annotations

import re
from pathlib import Path

REMOTE_LINK = re.compile(r"<link[^>]*href=\"https?://[^>]*>\s*")
REMOTE_SCRIPT = re.compile(r"<script[^>]*src=\"https?://[^>]*>\s*</script>\s*")
REMOTE_IMAGE = re.compile(r"https://great-expectations-web-assets\.s3[^\"')]*?(logo-long|full_logo_dark)\.png(\?[^\"')]*)?")

CSS = """
*,::after,::before{box-sizing:border-box}
body{margin:0;font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;font-size:14px;line-height:1.5;color:#212529;background:#fff}
a{color:#017cee;text-decoration:none}a:hover{text-decoration:underline}
h1,h2,h3,h4,h5,h6,.h6{margin:0 0 .5rem;font-weight:600;line-height:1.2}h3{font-size:1.4rem}h4{font-size:1.2rem}h5{font-size:1.05rem}.h6,h6{font-size:.95rem}
p{margin:0 0 1rem}.lead{font-size:1.1rem}
.container-fluid{width:100%;padding:0 15px;margin:0 auto}.row{display:flex;flex-wrap:wrap;margin:0 -15px}
[class*=col-]{position:relative;width:100%;padding:0 15px}.col-12{flex:0 0 100%;max-width:100%}.col-6{flex:0 0 50%;max-width:50%}
@media(min-width:768px){.col-md-2{flex:0 0 16.67%;max-width:16.67%}.col-md-10{flex:0 0 83.33%;max-width:83.33%}.d-md-block{display:block!important}
.d-md-inline-flex{display:inline-flex!important}.pl-md-4{padding-left:1.5rem!important}.pr-md-3{padding-right:1rem!important}}
@media(min-width:992px){.col-lg-2{flex:0 0 16.67%;max-width:16.67%}.col-lg-10{flex:0 0 83.33%;max-width:83.33%}}
.d-none{display:none!important}.d-flex{display:flex!important}.d-sm-block{display:block}.flex-column{flex-direction:column}
.align-items-center{align-items:center}.justify-content-center{justify-content:center}.float-left{float:left}.mr-auto{margin-right:auto}
.h-100{height:100%}.invisible{visibility:hidden}.text-center{text-align:center}.text-success{color:#2f9e44}.text-danger{color:#c92a2a}
.m-0{margin:0}.m-1{margin:.25rem}.m-2{margin:.5rem}.mt-0{margin-top:0}.mt-1{margin-top:.25rem}.mb-0{margin-bottom:0}.mb-1{margin-bottom:.25rem}
.mb-2{margin-bottom:.5rem}.mb-3{margin-bottom:1rem}.mb-4{margin-bottom:1.5rem}.ml-1{margin-left:.25rem}.ml-2{margin-left:.5rem}.mr-0{margin-right:0}
.mr-2{margin-right:.5rem}.p-0{padding:0}.p-1{padding:.25rem}.p-2{padding:.5rem}.p-3{padding:1rem}.pt-0{padding-top:0}.pt-4{padding-top:1.5rem}
.pb-0{padding-bottom:0}.pb-1{padding-bottom:.25rem}.pb-4{padding-bottom:1.5rem}.pl-5{padding-left:3rem}.pr-5{padding-right:3rem}.pr-3{padding-right:1rem}
.px-0{padding-left:0;padding-right:0}.pl-sm-3{padding-left:1rem}
.navbar{display:flex;align-items:center;padding:.5rem 1.5rem;background:#fff}.border-bottom{border-bottom:1px solid #dee2e6}
.sticky-top{position:sticky;top:0;z-index:1020}.fixed-bottom{position:fixed;bottom:0;left:0;right:0}.border{border:1px solid #dee2e6}
.nav{display:flex;flex-wrap:wrap;padding:0;margin:0;list-style:none}.nav-link{display:block;padding:.4rem .9rem}
.nav-tabs{border-bottom:1px solid #dee2e6}.nav-tabs .nav-link{border:1px solid transparent;border-radius:6px 6px 0 0;margin-bottom:-1px}
.nav-tabs .nav-link.active{color:#495057;background:#fff;border-color:#dee2e6 #dee2e6 #fff}.nav-pills .nav-link{border-radius:6px}
.ge-navigation-sidebar-link{display:block;padding:.2rem 0}
.tab-content>.tab-pane{display:none}.tab-content>.active{display:block}.fade:not(.show){opacity:0}.collapse:not(.show){display:none}
.alert{position:relative;padding:.6rem 1rem;margin-bottom:1rem;border:1px solid transparent;border-radius:6px}
.alert-secondary{color:#383d41;background:#e9ecef;border-color:#dee2e6}.alert-info{color:#0c5460;background:#e7f5ff;border-color:#a5d8ff}
.card{display:flex;flex-direction:column;background:#fff;border:1px solid #dee2e6;border-radius:8px;margin-bottom:1rem}
.card-header{padding:.6rem 1rem;background:#f8f9fa;border-bottom:1px solid #dee2e6;border-radius:8px 8px 0 0}.card-body{padding:1rem}.bg-light{background:#f8f9fa}
.badge{display:inline-block;padding:.2em .5em;font-size:80%;font-weight:600;border-radius:4px}.badge-secondary{color:#fff;background:#6c757d}
.breadcrumb{display:flex;flex-wrap:wrap;padding:.4rem 0;margin:0;list-style:none}.breadcrumb-item+.breadcrumb-item::before{content:"/";padding:0 .5rem;color:#868e96}
.btn{display:inline-block;padding:.3rem .75rem;border:1px solid transparent;border-radius:6px;cursor:pointer;font-size:.9rem}
.btn-sm{padding:.2rem .5rem;font-size:.8rem}.btn-primary{color:#fff;background:#017cee}.btn-secondary{color:#fff;background:#6c757d}.btn-group{display:inline-flex}
.close{float:right;background:none;border:0;font-size:1.4rem;line-height:1;cursor:pointer}
table{border-collapse:collapse;width:100%;margin-bottom:1rem}.table td,.table th,.table-sm td,.table-sm th,table[data-toggle] td,table[data-toggle] th{
padding:.3rem .5rem;border-top:1px solid #dee2e6;vertical-align:top;text-align:left}thead th{border-bottom:2px solid #dee2e6}
.table-responsive{overflow-x:auto}.clickable-row{cursor:pointer}.clickable-row:hover{background:#f1f3f5}
.cooltip .top{display:none}.show-scrollbars{overflow:auto}
.fas{font-style:normal}.fa-check-circle::before{content:"\\2714";color:#2f9e44}.fa-times::before{content:"\\2716";color:#c92a2a}
.fa-question-circle::before{content:"?"}#ge-cta-footer{display:none}
"""

JS = """(function(){
function all(sel){if(sel===document||sel instanceof Element)return[sel];try{return Array.from(document.querySelectorAll(sel));}catch(e){return[];}}
function cell(v){return v==null?"":String(v);}
function table(el,opts){if(typeof opts!=="object")return;var cols=opts.columns||[],data=opts.data||[];
 var h="<thead><tr>"+cols.map(function(c){return"<th>"+cell(c.title)+"</th>";}).join("")+"</tr></thead><tbody>";
 data.forEach(function(r){var link=r._table_row_link_path;h+="<tr"+(link?' class="clickable-row" data-href="'+link+'"':"")+">"+
  cols.map(function(c){var v=cell(r[c.field]);return"<td>"+(link&&c.field==="run_name"?'<a href="'+link+'">'+v+"</a>":v)+"</td>";}).join("")+"</tr>";});
 el.innerHTML=h+"</tbody>";
 el.querySelectorAll("tr[data-href]").forEach(function(tr){tr.addEventListener("click",function(){location.href=tr.dataset.href;});});}
function wrap(els){var w={length:els.length,
 ready:function(f){document.readyState==="loading"?document.addEventListener("DOMContentLoaded",f):f();return w;},
 on:function(){return w;},removeClass:function(c){els.forEach(function(e){e.classList.remove(c);});return w;},
 bootstrapTable:function(o){els.forEach(function(e){table(e,o);});return w;},modal:function(){return w;},
 fadeIn:function(){els.forEach(function(e){e.style.display="";});return w;},fadeOut:function(){els.forEach(function(e){e.style.display="none";});return w;},
 parent:function(){return wrap(els.map(function(e){return e.parentElement;}).filter(Boolean));}};return w;}
window.$=window.jQuery=function(s){return typeof s==="function"?wrap([document]).ready(s):wrap(all(s));};
document.addEventListener("click",function(ev){var a=ev.target.closest("[data-toggle]");if(!a)return;
 var kind=a.getAttribute("data-toggle"),target=document.querySelector(a.getAttribute("href")||a.getAttribute("data-target")||"#none");
 if(kind==="tab"&&target){ev.preventDefault();a.closest(".nav").querySelectorAll(".nav-link").forEach(function(l){l.classList.remove("active");});
  a.classList.add("active");Array.from(target.parentElement.children).forEach(function(p){p.classList.remove("active","show");});target.classList.add("active","show");}
 if(kind==="collapse"&&target){ev.preventDefault();target.classList.toggle("show");}});
})();
"""


def offline_page(text: str, prefix: str) -> str:
    """One page: remote assets out, the local ones in (`prefix` leads from the page to the site root)."""
    text = REMOTE_LINK.sub("", text)
    text = REMOTE_SCRIPT.sub("", text)
    text = REMOTE_IMAGE.sub(f"{prefix}static/images/logo-long.png", text)
    local = f'<link rel="stylesheet" href="{prefix}static/offline.css"><script src="{prefix}static/offline.js"></script>'
    return text.replace("<head>", "<head>" + local, 1)


def make_offline(site: Path) -> None:
    """Rewrite every page of a built Data Docs site and add the two local assets."""
    static = site / "static"
    static.mkdir(parents=True, exist_ok=True)
    (static / "offline.css").write_text(CSS)
    (static / "offline.js").write_text(JS)
    for page in site.rglob("*.html"):
        depth = len(page.relative_to(site).parts) - 1
        page.write_text(offline_page(page.read_text(), "../" * depth if depth else "./"))
